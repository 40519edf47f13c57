"""The FastAPI reference of bench/run.sh: the same 1 KiB read abx serves, with the
same bearer check, on uvicorn with uvloop and httptools (Debian's python3-fastapi,
python3-uvicorn, python3-uvloop, python3-httptools).

    python3 bench/fastapi_ref.py PORT WORKSPACE     (token in $ABX_BENCH_TOKEN)

GET /files/read?path=REL answers the JSON abx's files.read does (path, encoding,
size, content, offset, length, truncated, eof) after checking
`Authorization: Bearer <token>` in constant time and that the path stays inside the
workspace; 401 without the token. One process, one event loop: what a typical Python
agent server looks like, not a tuned multi-worker deployment.
"""
import hmac
import os
import sys

import uvicorn
from fastapi import FastAPI, Header, HTTPException, Query

PORT = int(sys.argv[1])
WS = os.path.realpath(sys.argv[2])
TOKEN = os.environ["ABX_BENCH_TOKEN"].encode()
app = FastAPI()


@app.get("/health")
def health():
    return {"status": "ok"}


@app.get("/files/read")
async def files_read(path: str = Query(...), authorization: str = Header(default="")):
    if not authorization.startswith("Bearer ") or not hmac.compare_digest(
            authorization[7:].encode(), TOKEN):
        raise HTTPException(status_code=401, detail="credentials are required")
    full = os.path.realpath(os.path.join(WS, path))
    if full != WS and not full.startswith(WS + os.sep):
        raise HTTPException(status_code=403, detail="path not allowed")
    with open(full, "rb") as f:
        data = f.read(1 << 20)
    text = data.decode("utf-8")
    return {"path": full, "encoding": "utf8", "size": len(data), "content": text, "offset": 0,
            "length": len(data), "truncated": False, "eof": True}


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=PORT, loop="uvloop", http="httptools",
                log_level="warning", access_log=False)
