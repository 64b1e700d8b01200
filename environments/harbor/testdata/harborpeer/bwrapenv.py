"""A Harbor BaseEnvironment on bubblewrap, for rlpipe's parity test and benchmark.

Each session gets a host directory standing for the container's writable
paths (/app, /root, /logs, /tests, /solution, …); every exec is a fresh
bwrap sandbox over the host's read-only /usr and /etc with those
directories bound, no network. start() builds the world from the
Dockerfile's WORKDIR, ENV, COPY and RUN lines (FROM is ignored), as rlpipe
does; anything else is left to the task to not need.
"""
import asyncio
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities

SESSIONS = Path(os.environ.get("RLPIPE_HARBOR_PEER_DIR", tempfile.gettempdir())) / "rlpipe-harbor-peer"
WRITABLE = ("app", "root", "logs", "tests", "solution", "tmp")


class BwrapEnvironment(BaseEnvironment):
    @staticmethod
    def type() -> str:
        return "bwrap"

    @property
    def capabilities(self):
        return EnvironmentCapabilities(disable_internet=True)

    def _validate_definition(self):
        if not (self.environment_dir / "Dockerfile").is_file():
            raise FileNotFoundError(f"{self.environment_dir}/Dockerfile: no such file")

    def _fs(self) -> Path:
        return SESSIONS / self.session_id / "fs"

    def _on_host(self, path: str) -> Path:
        norm = os.path.normpath(path)
        top = norm.strip("/").split("/")[0]
        if top not in WRITABLE:
            raise ValueError(f"{path}: only {', '.join('/' + w for w in WRITABLE)} are writable here")
        return self._fs() / norm.lstrip("/")

    async def start(self, force_build: bool) -> None:
        for d in (*WRITABLE, "logs/agent", "logs/verifier", "logs/artifacts"):
            (self._fs() / d).mkdir(parents=True, exist_ok=True)
        self._cwd, self._env = "/", {}
        text = (self.environment_dir / "Dockerfile").read_text()
        for line in text.replace("\\\n", " ").splitlines():
            op, _, args = line.strip().partition(" ")
            op, args = op.upper(), args.strip()
            if op == "WORKDIR":
                self._cwd = os.path.join(self._cwd, args)
                self._on_host(self._cwd).mkdir(parents=True, exist_ok=True)
            elif op == "ENV":
                for pair in shlex.split(args):
                    key, _, value = pair.partition("=")
                    self._env[key] = os.path.expandvars(value)
            elif op == "COPY":
                *srcs, dst = args.split()
                dst = os.path.join(self._cwd, dst)
                for src in srcs:
                    s = self.environment_dir / src
                    if s.is_dir():
                        await self.upload_dir(s, dst)
                    else:
                        await self.upload_file(s, dst + "/" + s.name if dst.endswith("/") else dst)
            elif op == "RUN":
                r = await self.exec(args, cwd=self._cwd)
                if r.return_code != 0:
                    raise RuntimeError(f"RUN {args}: exit {r.return_code}: {r.stderr}")

    async def stop(self, delete: bool):
        if delete:
            shutil.rmtree(SESSIONS / self.session_id, ignore_errors=True)

    async def upload_file(self, source_path, target_path: str):
        t = self._on_host(target_path)
        t.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source_path, t)

    async def upload_dir(self, source_dir, target_dir: str):
        shutil.copytree(source_dir, self._on_host(target_dir), dirs_exist_ok=True, symlinks=True)

    async def download_file(self, source_path: str, target_path):
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self._on_host(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir):
        shutil.copytree(self._on_host(source_dir), target_dir, dirs_exist_ok=True, symlinks=True)

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None) -> ExecResult:
        argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
                "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc"]
        for link in ("bin", "sbin", "lib", "lib64"):
            if os.path.islink("/" + link):
                argv += ["--symlink", os.readlink("/" + link), "/" + link]
        argv += ["--proc", "/proc", "--dev", "/dev"]
        for d in WRITABLE:
            argv += ["--bind", str(self._fs() / d), "/" + d]
        argv += ["--chdir", cwd or getattr(self, "_cwd", "/"), "--clearenv",
                 "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", "/root"]
        for k, v in {**getattr(self, "_env", {}), **(env or {})}.items():
            argv += ["--setenv", k, str(v)]
        argv += ["bash", "-c", command]
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout_sec)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            return ExecResult(stdout="", stderr=f"timed out after {timeout_sec}s", return_code=124)
        return ExecResult(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"), return_code=proc.returncode)
