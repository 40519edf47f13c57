"""abx_ops — declare abx operations in Python (stdlib only).

    from abx_ops import op

    @op("grader.run", effects="exec", paths=("workdir",))
    def run(ctx, submission: str, workdir: str = ".", timeout: int = 60) -> dict:
        '''Grade a submission.'''
        ...  # ctx.paths["workdir"] is the canonical, admitted path; use it, not the argument

abx loads a module named in its config (load: ["python:my_pkg.ops"]) in a confined
worker process, which reports the catalog of the ops the module declares and then runs
calls sent to it as JSON lines on stdin, answering JSON lines on stdout.

The parameter schema comes from the annotations, from a closed list: str int float
bool bytes, list[T], dict[str, T], T | None (Optional[T]), Literal[...], and TypedDict
or dataclass types (objects with typed fields). No annotation means str. A default
makes a parameter optional. Anything else is an error naming the parameter. A return
annotation that is a TypedDict or a dataclass is the op's result schema (the catalog,
OpenAPI, MCP's outputSchema and the generated clients type the result with it).
"""
import base64
import dataclasses
import inspect
import json
import sys
import traceback
import types
import typing

__all__ = ["op", "OpError", "Bytes", "registry"]

EFFECTS = ("read", "write", "delete", "exec", "net", "admin")
LIMITS = ("timeout", "max_output_bytes", "max_bytes", "max_entries", "rate", "concurrency", "memory", "pids", "cpu")

registry = {}  # op id -> declaration (with "fn")


class OpError(Exception):
    """An expected failure: answered with one of abx's error codes (args.invalid, files.not_found, ...)."""

    def __init__(self, code, message, **details):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


class Bytes:
    """A bytes result (sent base64-encoded; abx answers it as a JSON object)."""

    def __init__(self, data, content_type="application/octet-stream"):
        self.data = bytes(data)
        self.content_type = content_type


class SchemaError(TypeError):
    pass


def _is_typeddict(t):
    return isinstance(t, type) and issubclass(t, dict) and hasattr(t, "__annotations__") and hasattr(t, "__total__")


def _type_of(t, where, depth=0):
    """An annotation -> abx parameter type fields ({type, item, choices, fields, nullable})."""
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if t is inspect.Parameter.empty or t is str:
        return {"type": "string"}
    if t is bool:
        return {"type": "bool"}
    if t is int:
        return {"type": "int"}
    if t is float:
        return {"type": "number"}
    if t is bytes:
        return {"type": "bytes"}
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(args) == 2:
            out = _type_of(rest[0], where, depth)
            out["nullable"] = True
            return out
        raise SchemaError("%s: only 'T | None' unions are supported, not %r" % (where, t))
    if origin is typing.Literal:
        if not args or not all(isinstance(a, str) and a and "|" not in a for a in args):
            raise SchemaError("%s: Literal[...] must list non-empty strings without '|'" % where)
        return {"type": "enum", "choices": "|".join(args)}
    if origin in (list, typing.List) and len(args) == 1:
        inner = _type_of(args[0], where, depth + 1)
        if inner["type"] in ("list", "map") or inner.get("nullable"):
            raise SchemaError("%s: list items must be a scalar, Literal or object type" % where)
        out = {"type": "list", "item": inner["type"]}
        for k in ("choices", "fields"):
            if k in inner:
                out[k] = inner[k]
        return out
    if origin in (dict, typing.Dict) and len(args) == 2:
        if args[0] is not str:
            raise SchemaError("%s: dict keys must be str" % where)
        inner = _type_of(args[1], where, depth + 1)
        if inner["type"] in ("list", "map") or inner.get("nullable"):
            raise SchemaError("%s: dict values must be a scalar, Literal or object type" % where)
        out = {"type": "map", "item": inner["type"]}
        for k in ("choices", "fields"):
            if k in inner:
                out[k] = inner[k]
        return out
    if _is_typeddict(t) or dataclasses.is_dataclass(t):
        if depth > 3:
            raise SchemaError("%s: objects nest too deeply" % where)
        hints = typing.get_type_hints(t)
        required = getattr(t, "__required_keys__", None)
        fields = []
        if dataclasses.is_dataclass(t):
            defaults = {f.name: f for f in dataclasses.fields(t)}
        for name, ft in hints.items():
            spec = _type_of(ft, "%s.%s" % (where, name), depth + 1)
            spec["name"] = name
            if dataclasses.is_dataclass(t):
                f = defaults.get(name)
                spec["required"] = f is not None and f.default is dataclasses.MISSING and \
                    f.default_factory is dataclasses.MISSING
            else:
                spec["required"] = name in required if required is not None else True
            fields.append(spec)
        if not fields:
            raise SchemaError("%s: %s has no fields" % (where, t.__name__))
        return {"type": "object", "fields": fields}
    raise SchemaError("%s: the annotation %r is not supported (str int float bool bytes, list[T], dict[str, T], "
                      "T | None, Literal[...], TypedDict or dataclass)" % (where, t))


def _converter(t):
    """How a JSON argument becomes the annotated Python value (bytes from base64, dataclass
    instances from objects, recursively through Optional, list and dict); None = as is."""
    origin = typing.get_origin(t)
    args = typing.get_args(t)
    if t is bytes:
        return lambda v: base64.b64decode(v)
    if dataclasses.is_dataclass(t) and isinstance(t, type):
        hints = typing.get_type_hints(t)
        inner = {k: _converter(ft) for k, ft in hints.items()}
        return lambda v: t(**{k: (inner[k](x) if inner.get(k) and x is not None else x) for k, x in v.items()})
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return _converter(rest[0]) if len(rest) == 1 else None
    if origin in (list, typing.List) and args:
        c = _converter(args[0])
        return (lambda v: [c(x) for x in v]) if c else None
    if origin in (dict, typing.Dict) and len(args) == 2:
        c = _converter(args[1])
        return (lambda v: {k: c(x) for k, x in v.items()}) if c else None
    return None


def _json_default(v):
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode()
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return dataclasses.asdict(v)
    raise TypeError("%s is not JSON serializable" % type(v).__name__)


def _tuple(v, what):
    if v is None:
        return ()
    if isinstance(v, str):
        return (v,)
    if isinstance(v, (list, tuple)):
        return tuple(v)
    raise SchemaError("%s must be a string or a tuple of strings" % what)


def op(id, *, effects=None, summary=None, http=None, paths=(), command=None, urls=(), limits=(), group=None,
       install=(), stream="none", since=None, aliases=(), deprecated=None, requires_approval=False):
    """Declare the decorated function as the abx operation `id` (see the module docstring)."""
    def wrap(fn):
        where = "op '%s'" % id
        sig = inspect.signature(fn)
        try:
            hints = typing.get_type_hints(fn)
        except Exception as e:  # an annotation that does not even evaluate
            raise SchemaError("%s: cannot read the annotations: %s" % (where, e))
        params = list(sig.parameters.values())
        takes_ctx = bool(params) and params[0].name == "ctx"
        if takes_ctx:
            params = params[1:]
        effs = _tuple(effects, "effects")
        for e in effs:
            if e not in EFFECTS:
                raise SchemaError("%s: unknown effect %r (%s)" % (where, e, ", ".join(EFFECTS)))
        for l in _tuple(limits, "limits"):
            if l not in LIMITS:
                raise SchemaError("%s: unknown limit %r (%s)" % (where, l, ", ".join(LIMITS)))
        if isinstance(paths, dict):
            path_roots = {k: _tuple(v, "paths[%r]" % k) for k, v in paths.items()}
        else:
            path_roots = {k: () for k in _tuple(paths, "paths")}
        names = [p.name for p in params]
        for k in list(path_roots) + list(_tuple(urls, "urls")) + ([command] if command else []):
            if k not in names:
                raise SchemaError("%s: %r is declared in paths=/urls=/command= but is not a parameter" % (where, k))
        out = []
        converters = {}
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise SchemaError("%s: parameter '%s': *args and **kwargs are not supported" % (where, p.name))
            spec = _type_of(hints.get(p.name, inspect.Parameter.empty), "%s: parameter '%s'" % (where, p.name))
            spec["name"] = p.name
            conv = _converter(hints.get(p.name, inspect.Parameter.empty))
            if conv:
                converters[p.name] = conv
            spec["required"] = p.default is inspect.Parameter.empty
            if p.default is not inspect.Parameter.empty and p.default is not None:
                try:
                    spec["default"] = json.loads(json.dumps(p.default))
                except (TypeError, ValueError):
                    raise SchemaError("%s: parameter '%s': the default is not JSON" % (where, p.name))
            if p.name in path_roots:
                if spec["type"] != "string" and not (spec["type"] == "list" and spec.get("item") == "string"):
                    raise SchemaError("%s: path parameter '%s' must be str or list[str]" % (where, p.name))
                spec["kind"] = "path"
                spec["access"] = "read+write" if "write" in effs else "read"
                if path_roots[p.name]:
                    spec["roots"] = list(path_roots[p.name])
            elif p.name == command:
                spec["kind"] = "command"
            elif p.name in _tuple(urls, "urls"):
                spec["kind"] = "url"
            out.append(spec)
        doc = inspect.getdoc(fn) or ""
        decl = {
            "id": id, "effects": list(effs), "summary": summary or (doc.splitlines()[0] if doc else ""),
            "http": list(_tuple(http, "http")), "params": out, "limits": list(_tuple(limits, "limits")),
            "group": group, "install": list(_tuple(install, "install")), "stream": stream,
            "since": since, "aliases": list(_tuple(aliases, "aliases")), "deprecated": deprecated,
            "requires_approval": bool(requires_approval),
        }
        ret = hints.get("return")
        if _is_typeddict(ret) or (dataclasses.is_dataclass(ret) and isinstance(ret, type)):
            # a TypedDict or dataclass return annotation is the op's result schema
            decl["result"] = _type_of(ret, "%s: the return annotation" % where)["fields"]
        if id in registry:
            raise SchemaError("%s is declared twice" % where)
        registry[id] = dict(decl, fn=fn, takes_ctx=takes_ctx, converters=converters)
        return fn
    return wrap


class Ctx:
    """What a handler may rely on: canonical admitted values and the call's context."""

    def __init__(self, msg, out):
        self.request_id = msg.get("request_id")
        self.principal = msg.get("principal")
        self.op = msg.get("op")
        self.paths = msg.get("paths") or {}      # param -> canonical path (list for list parameters)
        self.argv = msg.get("argv") or []        # the canonical argv of a command parameter
        self.deadline_ms = msg.get("deadline_ms")  # CLOCK_MONOTONIC ms, or None
        self.limits = msg.get("limits") or {}
        self._out = out
        self._id = msg.get("id")

    def log(self, level, message):
        self._out({"log": {"id": self._id, "level": str(level), "message": str(message)}})


def catalog():
    return [{k: v for k, v in d.items() if k not in ("fn", "takes_ctx", "converters")} for d in registry.values()]


def _result(v):
    if isinstance(v, Bytes):
        return {"content_type": v.content_type, "content_base64": base64.b64encode(v.data).decode()}
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return dataclasses.asdict(v)
    return v


def _serve(module, stdin, stdout):
    def out(obj):
        stdout.write(json.dumps(obj, separators=(",", ":"), default=_json_default) + "\n")
        stdout.flush()

    try:
        __import__(module)
    except SchemaError as e:
        out({"fatal": str(e)})
        return 1
    except Exception as e:
        out({"fatal": "importing %s failed: %s: %s" % (module, type(e).__name__, e)})
        return 1
    out({"catalog": catalog()})
    for line in stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        d = registry.get(msg.get("op"))
        rid = msg.get("id")
        if d is None:
            out({"id": rid, "error": {"code": "op.not_enabled", "message": "no such operation in this worker"}})
            continue
        ctx = Ctx(msg, out)
        try:
            args = msg.get("args") or {}
            for k, conv in d["converters"].items():
                if args.get(k) is not None:
                    args[k] = conv(args[k])
            r = d["fn"](ctx, **args) if d["takes_ctx"] else d["fn"](**args)
            out({"id": rid, "result": _result(r)})
        except OpError as e:
            out({"id": rid, "error": {"code": e.code, "message": e.message, "details": e.details}})
        except Exception as e:
            out({"id": rid, "error": {"code": "server.internal", "message": "%s: %s" % (type(e).__name__, e),
                                      "trace": traceback.format_exc()[-2000:]}})
    return 0


def _main(argv):
    if len(argv) not in (2, 3):
        sys.stderr.write("usage: abx_ops.py MODULE [FOLDER]  (run by abx; see docs/custom-ops.md)\n")
        return 2
    if len(argv) == 3 and argv[2] not in sys.path:
        sys.path.insert(1, argv[2])  # the config file's folder: where the user's modules live
    # JSON lines on the real stdout; a handler's print() goes to stderr (abx's log)
    proto = sys.stdout
    sys.stdout = sys.stderr
    return _serve(argv[1], sys.stdin, proto)


if __name__ == "__main__":
    # run as a script: import the module by its own name so user code's `from abx_ops
    # import op` and this loop share one registry
    import os
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import abx_ops as _self
    sys.exit(_self._main(sys.argv))
