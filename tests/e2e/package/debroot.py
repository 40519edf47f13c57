"""A clean Debian 12 root for the package test: made once by debootstrap (minbase) and
kept as a tarball in the cache folder ($ABX_CACHE_DIR, else $XDG_CACHE_HOME/abx, else
~/.cache/abx: it does not depend on $ABX_HOME), unpacked fresh for each run. Commands run
in it by chroot inside a private mount namespace (unshare --mount), so the /proc, /dev
and cache mounts vanish with the command. apt's downloads are kept in the cache too.

Also: the unit file's [Service] section read as systemd reads it, and the ExecStart line
run the way systemd would run it (ServiceRunner): as User=/Group= with the unit's
Environment=, UMask=, LimitNOFILE=, no new privileges, an empty capability bounding set,
and the file-system view its Protect*/Private* options give (emulated with mounts)."""
import os
import re
import shlex
import shutil
import subprocess
import tarfile

SUITE = "bookworm"
MIRROR = os.environ.get("ABX_DEBIAN_MIRROR", "http://deb.debian.org/debian")
NETWORK_ERRORS = re.compile(r"Failed getting release file|Temporary failure resolving|Could not resolve|"
                            r"Failed to fetch|Network is unreachable|Connection (refused|timed out)|"
                            r"Couldn't download|unable to fetch|Unable to connect|No route to host")


class Unreachable(Exception):
    """The Debian mirror cannot be reached: the test skips and says so."""


def cache_dir():
    d = os.environ.get("ABX_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "abx")
    os.makedirs(d, exist_ok=True)
    return d


def arch():
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()


def rootfs_tarball(log):
    """The cached minbase tarball; debootstrap makes it on the first run."""
    tar = os.path.join(cache_dir(), f"debootstrap-{SUITE}-minbase-{arch()}.tar")
    if os.path.exists(tar):
        return tar
    work = tar + f".tmp{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    r = subprocess.run(["debootstrap", "--variant=minbase", SUITE, work, MIRROR], capture_output=True, text=True,
                       timeout=1200)
    log(f"debootstrap {SUITE} {MIRROR}: exit {r.returncode}")
    if r.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        text = r.stdout + r.stderr
        if NETWORK_ERRORS.search(text):
            raise Unreachable(f"debootstrap cannot reach {MIRROR}: " + text.strip().splitlines()[-1])
        raise RuntimeError("debootstrap failed:\n" + text[-3000:])
    with tarfile.open(tar + ".part", "w") as t:
        t.add(work, arcname=".")
    os.rename(tar + ".part", tar)
    shutil.rmtree(work, ignore_errors=True)
    return tar


def unpack(tar, dest):
    os.makedirs(dest, exist_ok=True)
    subprocess.run(["tar", "-C", dest, "--numeric-owner", "-xpf", tar], check=True)
    shutil.copy("/etc/resolv.conf", os.path.join(dest, "etc", "resolv.conf"))


def in_root(root, script, timeout=900, check=True):
    """Run a shell script in the root: chroot inside a private mount namespace, with /proc,
    /dev and the apt download cache mounted for it."""
    archives = os.path.join(cache_dir(), f"apt-archives-{SUITE}-{arch()}")
    os.makedirs(os.path.join(archives, "partial"), exist_ok=True)
    q = shlex.quote(root)
    outer = (f"set -e\nmount -t proc proc {q}/proc\nmount --rbind /dev {q}/dev\n"
             f"mount --bind {shlex.quote(archives)} {q}/var/cache/apt/archives\n"
             f"exec chroot {q} /bin/sh -c {shlex.quote(script)}\n")
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", outer], capture_output=True,
                       text=True, timeout=timeout,
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
                            "DEBIAN_FRONTEND": "noninteractive"})
    if check and r.returncode != 0:
        text = r.stdout + r.stderr
        if NETWORK_ERRORS.search(text):
            raise Unreachable(f"apt in the Debian 12 root cannot reach {MIRROR}: " + text.strip()[-400:])
        raise AssertionError(f"in the root: {script}\nexit {r.returncode}\n{text[-4000:]}")
    return r


def snapshot(root):
    """Every path of the root (but the mount points' contents and package bookkeeping),
    with its type, mode, owner, size and contents' mtime: what an install may leave."""
    skip = ("proc", "dev", "sys", "tmp", "var/tmp", "run", "var/cache", "var/log", "var/lib/apt", "var/lib/dpkg")
    out = {}
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel != "." and (rel in skip or any(rel.startswith(s + "/") for s in skip)):
            dirs[:] = []
            continue
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            key = "/" + os.path.relpath(p, root)
            out[key] = (st.st_mode, st.st_uid, st.st_gid, st.st_size if not os.path.isdir(p) else 0,
                        int(st.st_mtime) if not os.path.isdir(p) else 0)
    return out


def read_unit(path):
    """[Service] (and the other sections) as systemd reads them: a list of (key, value) per
    section, comments and blank lines dropped, backslash continuations joined."""
    sections, cur, pending = {}, None, ""
    for raw in open(path):
        line = raw.rstrip("\n")
        if pending:
            line, pending = pending + line.lstrip(), ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        s = line.strip()
        if not s or s[0] in "#;":
            continue
        if s.startswith("[") and s.endswith("]"):
            cur = sections.setdefault(s[1:-1], [])
            continue
        k, _, v = s.partition("=")
        cur.append((k.strip(), v.strip()))
    return sections


def unit_environment(service):
    env = {}
    for k, v in service:
        if k == "Environment":
            for item in shlex.split(v):
                name, _, val = item.partition("=")
                env[name] = val
    return env


def expand_exec(line, env):
    """systemd's ExecStart expansion: ${VAR} is one word, $VAR splits on whitespace."""
    words = []
    for w in shlex.split(line):
        if re.fullmatch(r"\$[A-Za-z_][A-Za-z0-9_]*", w):
            words.extend(env.get(w[1:], "").split())
        else:
            words.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", lambda m: env.get(m.group(1), ""), w))
    return words


# How each [Service] key of abx.service is honoured when ServiceRunner runs ExecStart.
EMULATED = {
    "User", "Group", "DynamicUser", "StateDirectory", "StateDirectoryMode", "Environment", "ExecStart", "UMask",
    "LimitNOFILE", "NoNewPrivileges", "CapabilityBoundingSet", "AmbientCapabilities", "ProtectSystem",
    "ProtectHome", "PrivateTmp", "PrivateDevices", "ProtectKernelTunables", "ProtectControlGroups", "ProtectProc",
}
# systemd's own seccomp filters, namespaces and supervision: not reproduced without it
NOT_EMULATED = {
    "Type", "ExecReload", "KillMode", "TimeoutStopSec", "Restart", "RestartSec", "ProtectKernelModules",
    "ProtectKernelLogs", "ProtectClock", "ProtectHostname", "RestrictSUIDSGID", "RestrictRealtime", "LockPersonality",
    "RestrictAddressFamilies", "SystemCallArchitectures",
}


def service_script(root, service):
    """The outer script (run by unshare --mount on the host) that sets up the unit's view
    of the root and execs ExecStart in it as the unit's user. Returns (script, argv, env)."""
    opts = dict(service)
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    user, group = opts["User"], opts.get("Group", opts["User"])
    assert opts.get("DynamicUser", "no") == "no"
    env.update({"USER": user, "LOGNAME": user, "HOME": "/var/lib/abx", "SHELL": "/usr/sbin/nologin"})
    env.update(unit_environment(service))
    argv = expand_exec(opts["ExecStart"], env)
    q = shlex.quote(root)
    mode = opts.get("StateDirectoryMode", "0755")
    lines = ["set -e", f"mount --bind {q} {q}"]
    # StateDirectory=: created with the user as owner, writable whatever ProtectSystem says
    for d in opts.get("StateDirectory", "").split():
        lines.append(f"chroot {q} install -d -o {user} -g {group} -m {mode} /var/lib/{shlex.quote(d)}")
    lines.append(f"mount --bind {q}/var/lib/abx {q}/var/lib/abx")
    # ProtectProc=invisible: other users' processes are hidden
    hide = ",hidepid=invisible" if opts.get("ProtectProc") == "invisible" else ""
    lines.append(f"mount -t proc -o nosuid,nodev,noexec{hide} proc {q}/proc")
    if opts.get("ProtectKernelTunables") == "yes":
        lines.append(f"mount --bind {q}/proc/sys {q}/proc/sys && mount -o remount,bind,ro {q}/proc/sys")
    # /sys read-only (ProtectKernelTunables, ProtectControlGroups: cgroups included)
    lines.append(f"mount --rbind /sys {q}/sys")
    if opts.get("ProtectKernelTunables") == "yes" or opts.get("ProtectControlGroups") == "yes":
        subs = [l.split()[4] for l in open("/proc/self/mountinfo") if l.split()[4].startswith("/sys")]
        for m in [s for s in subs if s == "/sys" or s.startswith("/sys/")]:
            lines.append(f"mount -o remount,bind,ro {q}{shlex.quote(m)} 2>/dev/null || true")
    if opts.get("PrivateDevices") == "yes":  # null zero full random urandom tty, a private devpts, shm
        lines.append(f"mount -t tmpfs -o mode=0755,nosuid tmpfs {q}/dev")
        for dev in ("null", "zero", "full", "random", "urandom", "tty"):
            lines.append(f"touch {q}/dev/{dev} && mount --bind /dev/{dev} {q}/dev/{dev}")
        lines.append(f"mkdir -p {q}/dev/pts {q}/dev/shm && mount -t devpts -o newinstance,ptmxmode=0666,mode=620 "
                     f"devpts {q}/dev/pts && ln -s pts/ptmx {q}/dev/ptmx && mount -t tmpfs -o mode=1777 tmpfs "
                     f"{q}/dev/shm")
    else:
        lines.append(f"mount --rbind /dev {q}/dev")
    if opts.get("PrivateTmp") == "yes":
        lines.append(f"mount -t tmpfs -o mode=1777 tmpfs {q}/tmp && mount -t tmpfs -o mode=1777 tmpfs {q}/var/tmp")
    if opts.get("ProtectHome") == "yes":
        for d in ("home", "root"):
            lines.append(f"mount -t tmpfs -o ro,mode=0755 tmpfs {q}/{d}")
    if opts.get("ProtectSystem") == "strict":
        lines.append(f"mount -o remount,bind,ro {q}")
    caps = []
    if opts.get("NoNewPrivileges") == "yes":
        caps.append("--no-new-privs")
    if "CapabilityBoundingSet" in opts and not opts["CapabilityBoundingSet"]:
        caps += ["--bounding-set", "-all", "--inh-caps", "-all"]
    if "AmbientCapabilities" in opts and not opts["AmbientCapabilities"]:
        caps += ["--ambient-caps", "-all"]
    # limits are set before the user change, as systemd does (raising a hard limit needs root)
    limit = f"/usr/bin/prlimit --nofile={opts['LimitNOFILE']} " if "LimitNOFILE" in opts else ""
    umask = opts.get("UMask", "0022")
    inner = f"umask {umask}; exec " + " ".join(shlex.quote(a) for a in argv)
    envs = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    lines.append(f"exec chroot {q} {limit}/usr/bin/env -i {envs} /usr/bin/setpriv --reuid {user} --regid {group} "
                 f"--init-groups {' '.join(caps)} /bin/sh -c {shlex.quote(inner)}")
    return "\n".join(lines) + "\n", argv, env
