#!/usr/bin/env python
"""Open the book's chapters in JupyterLab, live (``make lab``).

    python scripts/lab.py [--port 8888] [--no-browser] [extra jupyter-lab arguments]

JupyterLab serves the repository, opens on ``chapters/`` and listens on 127.0.0.1 only. The MyST
chapters (``chapters/*.md``) open as notebooks on a double click: ``jupyter-config/labconfig/
default_setting_overrides.json`` makes jupytext's "Jupytext Notebook" the default viewer of
markdown files; this script puts that folder on ``JUPYTER_CONFIG_PATH`` (nothing is written to
the reader's own Jupyter settings). ``jupyterlab-myst`` renders the chapters' MyST markup.

If the port is taken, the next free one is used and the script says which (JupyterLab itself is
started with ``--port-retries=0``, so the port printed here is the one it listens on). Running as
root adds ``--allow-root`` (JupyterLab refuses to start as root without it).

The browser test (``tests/test_lab.py``) starts JupyterLab with :func:`lab_command` and
:func:`lab_env`, so ``make lab`` and the test see the same configuration.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "jupyter-config"
HOST = "127.0.0.1"
DEFAULT_PORT = 8888
START_URL = "/lab/tree/chapters"
INSTALL_HINT = "pip install -e .[lab]"


def port_is_free(port: int, host: str = HOST) -> bool:
    """Whether ``host:port`` can be bound now (the same test JupyterLab makes before listening)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def choose_port(preferred: int, host: str = HOST, tries: int = 50) -> int:
    """``preferred`` if free, else the next free port above it (or any free port)."""
    for port in range(preferred, preferred + tries):
        if 0 < port < 65536 and port_is_free(port, host):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def lab_env(base: dict | None = None) -> dict:
    """Environment for JupyterLab: the project's lab settings on the config path, live widgets."""
    env = dict(os.environ if base is None else base)
    paths = [str(CONFIG_DIR)] + [p for p in env.get("JUPYTER_CONFIG_PATH", "").split(os.pathsep) if p]
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(paths)
    env.pop("TOKENDYNAMICS_HEADLESS", None)  # set by the book build only: JupyterLab shows the widgets
    env.pop("MPLBACKEND", None)  # a forced Agg backend would hide the inline figures
    return env


def lab_command(
    port: int, *, token: str | None = None, open_browser: bool = True, extra: list[str] | tuple[str, ...] = ()
) -> list[str]:
    """The ``jupyter lab`` command line (the interpreter of this venv, exactly ``port``)."""
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.ip={HOST}",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={ROOT}",
        f"--LabApp.default_url={START_URL}",
    ]
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    if not open_browser:
        cmd.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return [*cmd, *extra]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("LAB_PORT") or DEFAULT_PORT),
        help=f"preferred port (default $LAB_PORT or {DEFAULT_PORT}); the next free one if taken",
    )
    parser.add_argument("--no-browser", action="store_true", help="do not open a web browser")
    args, extra = parser.parse_known_args(argv)
    try:
        import jupyterlab  # noqa: F401
        import jupyterlab_myst  # noqa: F401
        import jupytext  # noqa: F401
    except ImportError as err:
        raise SystemExit(f"JupyterLab, jupytext or jupyterlab-myst is missing ({err}); run `{INSTALL_HINT}`") from None
    port = choose_port(args.port)
    if port != args.port:
        print(f"make lab: port {args.port} on {HOST} is taken; JupyterLab will listen on port {port} instead.")
    print(
        f"make lab: JupyterLab on http://{HOST}:{port}{START_URL} (the address with its token follows). "
        "Double-click a chapter to open it as a notebook; Ctrl-C twice to stop.",
        flush=True,
    )
    cmd = lab_command(port, open_browser=not args.no_browser, extra=extra)
    os.chdir(ROOT)
    os.execve(cmd[0], cmd, lab_env())


if __name__ == "__main__":
    main()
