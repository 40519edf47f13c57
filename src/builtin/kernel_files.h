/* kernel_files.h — the Python a kernel runs besides ipykernel, written into its private
 * directory at start (kernels.c): the launcher and the `host` module. */
#ifndef ABX_BUILTIN_KERNEL_FILES_H
#define ABX_BUILTIN_KERNEL_FILES_H

/* abx_launch.py: takes the descriptor map and the host credential out of the environment
 * (so cells never see them there), makes every ZeroMQ bind use the socket abx made for
 * that endpoint (ZMQ_USE_FD) and refuses any other bind but in-process ones (ipykernel's
 * TCP IOPub pipe then stays off), binds the host channel, and runs ipykernel. */
static const char kernel_launcher_py[] =
    "import errno, json, os, sys\n"
    "_fds = json.loads(os.environ.pop('ABX_KERNEL_FDS', '{}'))\n"
    "_tok = os.environ.pop('ABX_KERNEL_CREDENTIAL', '')\n"
    "_host = os.environ.pop('ABX_KERNEL_HOST', '')\n"
    "import zmq\n"
    "_bind = zmq.Socket.bind\n"
    "def _abx_bind(self, addr):\n"
    "    fd = _fds.get(addr)\n"
    "    if fd is None and not addr.startswith('inproc://'):\n"
    "        raise zmq.ZMQError(errno.EACCES)\n"
    "    if fd is None:\n"
    "        return _bind(self, addr)\n"
    "    self.setsockopt(zmq.USE_FD, fd)\n"
    "    return _bind(self, addr)\n"
    "zmq.Socket.bind = _abx_bind\n"
    "import host\n"
    "host._setup(_host, _tok)\n"
    "del _tok\n"
    "from ipykernel.kernelapp import launch_new_instance\n"
    "sys.argv = [sys.argv[0]] + sys.argv[1:]\n"
    "launch_new_instance()\n";

/* host.py: host.call("files.read", path=...), the attribute tree host.files.read(...),
 * host.submit_output(value). Every failure is a value {"error": {code, message}}, never
 * an exception (the soft-fail contract). */
static const char kernel_host_py[] =
    "\"\"\"abx's ops from inside a kernel: host.call('files.read', path='x'),\n"
    "host.files.read(path='x'), host.submit_output(value). Failures come back as\n"
    "{'error': {'code': ..., 'message': ...}} values.\"\"\"\n"
    "import json, threading\n"
    "_sock = None\n"
    "_tok = ''\n"
    "_lock = threading.Lock()\n"
    "def _setup(endpoint, token):\n"
    "    global _sock, _tok\n"
    "    import zmq\n"
    "    s = zmq.Context.instance().socket(zmq.REQ)\n"
    "    s.setsockopt(zmq.LINGER, 0)\n"
    "    s.setsockopt(zmq.REQ_RELAXED, 1)\n"
    "    s.setsockopt(zmq.REQ_CORRELATE, 1)\n"
    "    s.bind(endpoint)\n"
    "    _sock, _tok = s, token\n"
    "def _err(code, msg):\n"
    "    return {'error': {'code': code, 'message': msg}}\n"
    "def _ask(req, timeout_ms=600000):\n"
    "    if _sock is None:\n"
    "        return _err('kernel.host_unavailable', 'no channel to abx')\n"
    "    req['credential'] = _tok\n"
    "    with _lock:\n"
    "        try:\n"
    "            _sock.send(json.dumps(req).encode())\n"
    "            if not _sock.poll(timeout_ms):\n"
    "                return _err('kernel.host_unavailable', 'abx did not answer (host calls are served while a cell runs)')\n"
    "            return json.loads(_sock.recv())\n"
    "        except Exception as e:\n"
    "            return _err('kernel.host_unavailable', str(e))\n"
    "def call(op, **args):\n"
    "    if not isinstance(op, str):\n"
    "        return _err('args.invalid', 'op must be a string')\n"
    "    try:\n"
    "        json.dumps(args)\n"
    "    except (TypeError, ValueError) as e:\n"
    "        return _err('args.invalid', 'arguments must be JSON values: %s' % e)\n"
    "    return _ask({'op': op, 'args': args})\n"
    "def submit_output(value):\n"
    "    try:\n"
    "        json.dumps(value)\n"
    "    except (TypeError, ValueError) as e:\n"
    "        return _err('args.invalid', 'the output must be a JSON value: %s' % e)\n"
    "    return _ask({'submit_output': value})\n"
    "class _Node:\n"
    "    def __init__(self, name):\n"
    "        self._name = name\n"
    "    def __getattr__(self, part):\n"
    "        if part.startswith('_'):\n"
    "            raise AttributeError(part)\n"
    "        return _Node(self._name + '.' + part)\n"
    "    def __call__(self, **args):\n"
    "        return call(self._name, **args)\n"
    "    def __repr__(self):\n"
    "        return '<abx op %s>' % self._name\n"
    "def __getattr__(name):\n"
    "    if name.startswith('_'):\n"
    "        raise AttributeError(name)\n"
    "    return _Node(name)\n";

#endif
