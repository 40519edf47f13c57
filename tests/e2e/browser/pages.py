"""The test site: pages under /ok/ are in scope, /secret/ never is. Every request the
server sees is logged, so a test can prove a refused URL was never fetched."""
import http.server
import threading

PNG_RED = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010802000000907753de"
    "0000000c4944415408d763f8cfc000000301010018dd8db00000000049454e44ae426082")

PAGES = {
    "/ok/index.html": "<html><head><title>Start</title></head><body><h1 id=h>Hello</h1>"
                      "<p>Some <b>bold</b> text and a <a href='/ok/next.html'>link</a>.</p>"
                      "<ul><li>one</li><li>two</li></ul>"
                      "<button onclick=\"document.getElementById('h').textContent='Clicked'\">Change</button>"
                      "</body></html>",
    "/ok/next.html": "<html><head><title>Next</title></head><body><h1>Next page</h1></body></html>",
    "/ok/form.html": "<html><head><title>Form</title></head><body><form action='/ok/done.html' method=get>"
                     "<input name=q aria-label=Query></form></body></html>",
    "/ok/done.html": "<html><head><title>Done</title></head><body><h1>Submitted</h1></body></html>",
    "/ok/red.html": "<html><body style='margin:0;background:#ff0000'><div style='height:3000px'></div></body></html>",
    "/ok/iframe.html": "<html><body><h1>Frame host</h1><iframe src='{SECRET}/frame.html'></iframe></body></html>",
    "/ok/img.html": "<html><body><h1>Image</h1><img src='{SECRET}/img.png'></body></html>",
    "/ok/fetch.html": "<html><body><h1>Fetch</h1><script>fetch('{SECRET}/api').catch(e => 0);"
                      "new Image().src = '{OTHER}/beacon';</script></body></html>",
    "/ok/popup.html": "<html><body><button onclick=\"window.open('{SECRET}/popup.html')\">Open</button></body></html>",
    "/ok/meta.html": "<html><head><meta http-equiv=refresh content='0;url={SECRET}/meta.html'></head>"
                     "<body><h1>Meta</h1></body></html>",
    "/ok/ws.html": "<html><head><title>WS</title></head><body><script>try { new WebSocket('{WS}/ws') } catch (e) {}"
                   "</script></body></html>",
    "/ok/worker.html": "<html><body><h1>Worker</h1><script>new Worker('/ok/worker.js')</script></body></html>",
    "/ok/worker.js": "fetch('{SECRET}/from-worker').catch(e => 0)",
    "/ok/dl.html": "<html><body><a href='/ok/report.txt' download='../../report.txt'>Get report</a></body></html>",
    "/ok/report.txt": "quarterly numbers\n",
    "/ok/sw.html": "<html><head><title>SW</title></head><body><script>"
                   "navigator.serviceWorker.register('/ok/sw.js', {scope: '/ok/'})</script></body></html>",
    "/ok/sw.js": "self.addEventListener('install', e => e.waitUntil(fetch('{SECRET}/from-sw').catch(x => 0)))",
    "/ok/opener.html": "<html><head><title>Opener</title></head><body>"
                       "<button onclick=\"window.open('/ok/size.html?popup')\">Pop</button>"
                       "<a href='/ok/size.html?blank' target=_blank>Blank</a></body></html>",
    "/ok/size.html": "<html><head><title>size</title></head><body><script>"
                     "document.title = innerWidth + 'x' + innerHeight + ' ' + location.search</script></body></html>",
    "/ok/wsecho.html": "<html><head><title>WS echo</title></head><body><script>const u = new URLSearchParams(location.search).get('u'); const wsres = new Promise(r => { try { const w = new WebSocket(u); w.onopen = () => w.send('hi'); w.onmessage = m => r('echo:' + m.data); w.onerror = () => r('error') } catch (e) { r('throw') } }); window.wsres = wsres"
                       "</script></body></html>",
    "/ok/wsworker.js": "const u = new URLSearchParams(location.search).get('u'); const wsres = new Promise(r => { try { const w = new WebSocket(u); w.onopen = () => w.send('hi'); w.onmessage = m => r('echo:' + m.data); w.onerror = () => r('error') } catch (e) { r('throw') } }); wsres.then(v => postMessage(v))",
    "/ok/wsworker.html": "<html><body><script>window.wsres = new Promise(r => {"
                         " new Worker('/ok/wsworker.js' + location.search).onmessage = m => r(m.data) })</script></body></html>",
    "/ok/wsframe.html": "<html><body><script>const f = document.createElement('iframe');"
                        " f.src = new URLSearchParams(location.search).get('f'); document.body.appendChild(f);"
                        " window.wsres = new Promise(r => addEventListener('message', m => r(m.data)))</script></body></html>",
    "/ok/wschild.html": "<html><body><script>const u = new URLSearchParams(location.search).get('u'); const wsres = new Promise(r => { try { const w = new WebSocket(u); w.onopen = () => w.send('hi'); w.onmessage = m => r('echo:' + m.data); w.onerror = () => r('error') } catch (e) { r('throw') } }); wsres.then(v => parent.postMessage(v, '*'))</script></body></html>",
    "/ok/file.html": "<html><body><h1>File</h1><iframe src='file:///etc/passwd'></iframe></body></html>",
}


class Site:
    def __init__(self, host="127.0.0.1", ws_host="127.0.0.1"):
        site = self
        self.hits = []

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                site.hits.append(self.path)
                path = self.path.split("?")[0]
                if path == "/ok/redirect":
                    self.send_response(302)
                    self.send_header("Location", site.secret + "/redirected")
                    self.end_headers()
                    return
                if path == "/ok/img.png":
                    body, ctype = PNG_RED, "image/png"
                elif path in PAGES:
                    body = site.render(PAGES[path]).encode()
                    ctype = "application/javascript" if path.endswith(".js") else \
                        "text/plain" if path.endswith(".txt") else "text/html"
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        self.base = "http://%s:%d" % (host, self.port)
        self.ws_host = ws_host
        self.secret = self.base + "/secret"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def render(self, text):
        return (text.replace("{SECRET}", self.secret).replace("{OTHER}", "http://127.0.0.2:%d" % self.port)
                .replace("{WS}", "ws://%s:%d/secret" % (self.ws_host, self.port)))

    def url(self, path):
        return self.base + path

    def secret_hits(self):
        return [h for h in self.hits if not h.startswith("/ok/") and h != "/favicon.ico"]

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()
