"""A private ClickHouse server for tests and benchmarks: its own directory, config and
free loopback ports; started and stopped by the caller (never the system's service)."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SERVER = "clickhouse-server"


def server_binary() -> str | None:
    """The clickhouse-server executable, or None (Debian: clickhouse-server)."""
    for name in (SERVER, "clickhouse"):
        found = shutil.which(name) or (f"/usr/sbin/{name}" if os.path.exists(
            f"/usr/sbin/{name}") else None)
        if found:
            return found
    return None


def driver_missing() -> str | None:
    """Why the ClickHouse client package cannot be used, or None."""
    try:
        import clickhouse_driver  # noqa: F401
    except ImportError:
        return "clickhouse-driver is not installed (pip install proftui[fleet])"
    return None


def free_port() -> int:
    """A loopback port nothing listens on now, below the kernel's ephemeral range: a
    port from bind(0) may be taken by any outgoing connection before the server binds
    it (a cluster test's server once failed so, "Address already in use")."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    for _ in range(100):
        port = random.randrange(max(1024, low - 12000), low) if low > 2048 else 0
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise RuntimeError("no free loopback port below the ephemeral range")


class PortTaken(RuntimeError):
    """Another process bound one of the server's ports before it did."""


CONFIG = """<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{root}/log/server.log</log>
    <errorlog>{root}/log/error.log</errorlog><size>10M</size><count>1</count></logger>
  <listen_host>127.0.0.1</listen_host>
  <tcp_port>{tcp}</tcp_port>
  <http_port>{http}</http_port>
  <interserver_http_port>{inter}</interserver_http_port>
  <interserver_http_host>127.0.0.1</interserver_http_host>
  <path>{root}/data/</path>
  <tmp_path>{root}/tmp/</tmp_path>
  <user_files_path>{root}/user_files/</user_files_path>
  <format_schema_path>{root}/format_schemas/</format_schema_path>
  <users_config>{root}/users.xml</users_config>
  <default_profile>default</default_profile>
  <default_database>default</default_database>
  <mark_cache_size>104857600</mark_cache_size>
  <max_concurrent_queries>20</max_concurrent_queries>
  <timezone>UTC</timezone>
  <mlock_executable>false</mlock_executable>
  <remote_servers>{clusters}</remote_servers>
</yandex>
"""

USERS = """<?xml version="1.0"?>
<yandex>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage>
    <max_threads>2</max_threads></default></profiles>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile><quota>default</quota></default>
    <{user}><password>{password}</password><networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <profile>default</profile><quota>default</quota></{user}>
  </users>
  <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
    <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
  </interval></default></quotas>
</yandex>
"""


@dataclass
class Server:
    """One running server: its ports and directory; `stop()` ends it (SIGTERM, then KILL)."""

    root: Path
    tcp: int
    http: int
    process: subprocess.Popen | None = None
    user: str = "proftui_test"
    password: str = "s3cret-pw"
    shards: Sequence[int] = field(default_factory=tuple)  # tcp ports of a cluster's shards

    def url(self, database: str = "prof", query: str = "", auth: bool = False) -> str:
        cred = f"{self.user}:{self.password}@" if auth else ""
        return f"clickhouse://{cred}127.0.0.1:{self.tcp}/{database}" + (
            f"?{query}" if query else "")

    def start(self, timeout_s: float = 60.0) -> None:
        binary = server_binary()
        assert binary is not None
        log = open(self.root / "log" / "stdout.log", "ab")  # noqa: SIM115 - kept by Popen
        self.process = subprocess.Popen(
            [binary, f"--config-file={self.root / 'config.xml'}"], stdout=log, stderr=log,
            stdin=subprocess.DEVNULL, cwd=self.root, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if "Address already in use" in self.tail():  # it may run on, deaf on that port
                self.stop()
                raise PortTaken(f"clickhouse-server: {self.tail()}")
            if self.process.poll() is not None:
                raise RuntimeError(f"clickhouse-server exited: {self.tail()}")
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.tcp), timeout=0.5):
                if self._answers():
                    return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"clickhouse-server did not start in {timeout_s:.0f} s: "
                           f"{self.tail()}")

    def _answers(self) -> bool:
        try:
            from clickhouse_driver import Client
        except ImportError:
            return True
        try:
            # Every wait short: a port another process listens on never answers.
            Client("127.0.0.1", port=self.tcp, connect_timeout=1, send_receive_timeout=1,
                   sync_request_timeout=1).execute("SELECT 1")
        except Exception:
            return False
        return True

    def tail(self) -> str:
        text = ""
        for name in ("error.log", "stdout.log"):
            with contextlib.suppress(OSError):
                text += (self.root / "log" / name).read_text(errors="replace")[-600:]
        return " ".join(text.split())[-600:]

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def disk_bytes(self, database: str) -> int:
        """Bytes the database's tables hold on disk (data files, marks, indexes)."""
        total = 0
        for dirpath, _dirs, files in os.walk(self.root / "data" / "data" / database):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(dirpath, name)).st_size
        return total


def make_servers(count: int, base: Path | None = None, cluster: str = "proftui_test"
                 ) -> list[Server]:
    """`count` configured (not started) servers on free ports; with two or more, each
    knows the cluster `cluster` with one shard per server."""
    root = Path(tempfile.mkdtemp(prefix="proftui-ch-", dir=base))
    servers = []
    ports = [(free_port(), free_port(), free_port()) for _ in range(count)]
    shards = "".join(f"<shard><replica><host>127.0.0.1</host><port>{tcp}</port>"
                     f"</replica></shard>" for tcp, _h, _i in ports)
    clusters = f"<{cluster}>{shards}</{cluster}>" if count > 1 else ""
    for i, (tcp, http, inter) in enumerate(ports):
        home = root / f"node{i}"
        for sub in ("log", "data", "tmp", "user_files", "format_schemas"):
            (home / sub).mkdir(parents=True)
        server = Server(home, tcp, http, shards=[p[0] for p in ports])
        (home / "config.xml").write_text(CONFIG.format(
            root=home, tcp=tcp, http=http, inter=inter, clusters=clusters))
        (home / "users.xml").write_text(USERS.format(user=server.user,
                                                     password=server.password))
        servers.append(server)
    return servers


@contextlib.contextmanager
def running_servers(count: int = 1) -> Iterator[list[Server]]:
    """`count` started servers, stopped and removed afterwards (on other ports again when
    another process took one first: each test's servers and clients race for them)."""
    for attempt in range(3):
        servers = make_servers(count)
        try:
            for server in servers:
                server.start()
            break
        except BaseException as exc:
            for server in servers:
                server.stop()
            shutil.rmtree(servers[0].root.parent, ignore_errors=True)
            if not isinstance(exc, PortTaken) or attempt == 2:
                raise
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(servers[0].root.parent, ignore_errors=True)
