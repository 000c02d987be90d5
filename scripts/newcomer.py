"""A newcomer's first hour, end to end, on a clean clone: each step as the pages say, timed.

    python3 scripts/newcomer.py [--keep DIR]

It clones this repository's committed HEAD into a temporary folder (or DIR, kept afterwards)
and, there, with no provider key in the environment:

1. runs the README's first command verbatim: a fresh ``.venv`` installed with
   ``-c constraints.txt``, then ``replyguard demo``;
2. runs every block of Getting started and the README as a reader does, each python block
   saved to its file and run with ``python FILE`` (``tests/support/docs_snippets.py``, with the
   ``.venv``'s interpreter, so against replyguard as installed rather than the source tree);
3. runs ``replyguard check-config config.example.json`` without a key, then with one, and
   says what each answered (with the key it must pass);
4. serves the FastAPI example in its offline mode and sends one message from headless
   Chromium, waiting for the reply to pass (skipped, with a note, while the example has no
   offline mode);
5. writes the eval report of ``examples/eval/sample.jsonl`` (``--replay``) and opens
   ``report.html`` in headless Chromium.

Each step prints its time; the last lines are a table of them. Exit 0 when every step that ran
passed, 1 otherwise. The installs go through pip as configured on the machine (an offline
mirror works). ``.ci/run`` runs it after the suite; ``tests/test_newcomer.py`` (marked slow)
runs it too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AZURE_API_KEY")
OFFLINE_ENV = "REPLYGUARD_EXAMPLE_OFFLINE"
QUESTION = "Plan a three-day trip to Lisbon."


class Skipped(Exception):
    """A step whose pieces are not in this checkout: it says which."""


class StepFailed(Exception):
    """A step that ran and did not do what the pages say."""


def reader_env(**extra: str) -> dict[str, str]:
    """The environment without provider keys (or the project's own PYTHONPATH)."""
    env = {k: v for k, v in os.environ.items() if k not in KEYS and k != "PYTHONPATH"}
    env.update(extra)
    return env


def run(
    command: str, cwd: Path, *, env: dict[str, str] | None = None, timeout: float = 1200
) -> subprocess.CompletedProcess[str]:
    """``command`` in bash, output captured (stdout and stderr together)."""
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env if env is not None else reader_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,
    )


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def readme_first_command(clone: Path) -> str:
    """The README's first command, as the README shows it."""
    lines = (clone / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("```sh")
    return lines[start + 1]


# -- the steps: each returns a short note, raises Skipped or StepFailed -------------------------


def install_and_demo(clone: Path) -> str:
    command = readme_first_command(clone)
    if not command.endswith("replyguard demo") or "-c constraints.txt" not in command:
        raise StepFailed(f"the README's first command is not install + demo: {command}")
    done = run(command, clone)
    if done.returncode:
        raise StepFailed(f"exit {done.returncode}:\n{tail(done.stdout)}")
    turns = done.stdout.count("→ status=")
    if not turns or "Next steps" not in done.stdout:
        raise StepFailed("the demo did not print its turns:\n" + tail(done.stdout))
    return f"{turns} scripted turns; {command}"


def getting_started(clone: Path) -> str:
    pages = ["docs/getting-started.md", "README.md"]
    runner = "tests/support/docs_snippets.py"
    done = run(f".venv/bin/python {runner} {' '.join(pages)}", clone)
    if done.returncode:
        raise StepFailed(tail(done.stdout, 40))
    scripts = re.findall(r"^\$ python (\S+)$", done.stdout, flags=re.MULTILINE)
    return f"{len(scripts)} scripts ran as python FILE: {', '.join(scripts)}"


def check_config(clone: Path) -> str:
    command = ".venv/bin/replyguard check-config config.example.json"
    without = run(command, clone)
    with_key = run(command, clone, env=reader_env(ANTHROPIC_API_KEY="sk-ant-newcomer-placeholder"))
    said = [
        f"without a key: exit {without.returncode}, {tail(without.stdout, 1)!r}",
        f"with a key: exit {with_key.returncode}, {tail(with_key.stdout, 1)!r}",
    ]
    if with_key.returncode or "Traceback" in without.stdout + with_key.stdout:
        raise StepFailed("; ".join(said) + "\n" + with_key.stdout + without.stdout)
    return "; ".join(said)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for_http(url: str, server: subprocess.Popen[str], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise StepFailed(f"the server exited {server.returncode}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
            if answer.status == 200:
                return
        time.sleep(0.3)
    raise StepFailed(f"{url} did not answer within {seconds:.0f} s")


@contextlib.contextmanager
def serving(clone: Path, log: Path) -> Iterator[str]:
    """The FastAPI example in its offline mode, under uvicorn, on a free port."""
    port = free_port()
    command = [".venv/bin/uvicorn", "--app-dir", "examples/fastapi_backend", "app:app"]
    with log.open("w", encoding="utf-8") as out:
        server = subprocess.Popen(
            [*command, "--port", str(port)],
            cwd=clone,
            env=reader_env(**{OFFLINE_ENV: "1"}),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_for_http(f"http://127.0.0.1:{port}/", server)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def chromium_driver(clone: Path) -> type:
    """The suite's headless Chromium driver (DevTools over a pipe, stdlib only)."""
    path = clone / "tests" / "support" / "chromium.py"
    spec = importlib.util.spec_from_file_location("newcomer_chromium", path)
    if spec is None or spec.loader is None:
        raise StepFailed(f"no Chromium driver at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if module.CHROMIUM is None:
        raise StepFailed("chromium is not installed (Debian: apt-get install chromium)")
    driver: type = module.Chromium
    return driver


async def send_one_message(chromium: type, url: str) -> tuple[str, str, bytes]:
    """The reply's status and text once the page shows it settled, and a screenshot."""
    async with chromium(width=900, height=640) as browser:
        page = await browser.open(url + "/")
        await page.evaluate("document.getElementById('message').focus()")
        await page.send("Input.insertText", text=QUESTION)
        await page.evaluate("document.getElementById('send').click()")
        reply = "document.querySelector('.assistant')"
        await page.wait_for(
            f"{reply} && {reply}.dataset.status && !document.getElementById('send').disabled",
            seconds=60,
        )
        status = await page.evaluate(f"{reply}.dataset.status")
        text = await page.evaluate(f"{reply}.querySelector('.text').textContent")
        return str(status), str(text), await page.screenshot()


def fastapi_offline(clone: Path, out: Path) -> str:
    app = clone / "examples" / "fastapi_backend" / "app.py"
    if not app.exists() or OFFLINE_ENV not in app.read_text(encoding="utf-8"):
        raise Skipped(f"the FastAPI example has no offline mode ({OFFLINE_ENV}) in this checkout")
    chromium = chromium_driver(clone)
    install = ".venv/bin/pip install -q -c constraints.txt fastapi uvicorn"
    done = run(install, clone)
    if done.returncode:
        raise StepFailed(f"{install}: exit {done.returncode}\n{tail(done.stdout)}")
    with serving(clone, out / "uvicorn.log") as url:
        status, text, png = asyncio.run(send_one_message(chromium, url))
    (out / "chat.png").write_bytes(png)
    if status != "passed" or not text:
        raise StepFailed(f"the reply ended {status!r}: {text!r}")
    return f"the reply {status}: {text[:60]!r} (screenshot: {out / 'chat.png'})"


async def open_report(chromium: type, report: str) -> tuple[str, int, bytes]:
    """The page's text, its number of charts, and a screenshot."""
    async with chromium(width=1280, height=900) as browser:
        page = await browser.open(report)
        text = await page.evaluate("document.body.innerText")
        svg = await page.evaluate("document.querySelectorAll('svg').length")
        return str(text), int(svg), await page.screenshot()


def eval_report(clone: Path, out: Path) -> str:
    dataset = "examples/eval/sample.jsonl"
    if not (clone / dataset).exists():
        raise Skipped(f"no {dataset} in this checkout")
    folder = out / "eval"
    done = run(f".venv/bin/replyguard eval {dataset} --replay --out {folder}", clone)
    report = folder / "report.html"
    if done.returncode or not report.exists():
        raise StepFailed(f"replyguard eval: exit {done.returncode}\n{tail(done.stdout)}")
    text, svg, png = asyncio.run(open_report(chromium_driver(clone), report.as_uri()))
    screenshot = out / "report.png"
    screenshot.write_bytes(png)
    headline = next((line for line in text.splitlines() if "agrees with the labels" in line), "")
    if not headline or not svg:
        raise StepFailed(f"report.html shows no headline or no chart: {text[:300]!r}")
    return f"{headline[:80]!r}, {svg} charts (screenshot: {screenshot})"


# -- running them ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--keep", metavar="DIR", help="clone into DIR and keep it afterwards")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        if args.keep:
            base = Path(args.keep).resolve()
            base.mkdir(parents=True, exist_ok=True)
        else:
            base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="newcomer-")))
        return walk(base)


def walk(base: Path) -> int:
    clone, out = base / "replyguard", base / "out"
    shutil.rmtree(clone, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    steps: list[tuple[str, Callable[[], str]]] = [
        ("clone", lambda: clone_head(clone)),
        ("README command 1: install + demo", lambda: install_and_demo(clone)),
        ("Getting started, each block as a script", lambda: getting_started(clone)),
        ("check-config config.example.json", lambda: check_config(clone)),
        ("FastAPI example offline, one message in Chromium", lambda: fastapi_offline(clone, out)),
        ("eval report in Chromium", lambda: eval_report(clone, out)),
    ]
    results: list[tuple[str, str, float]] = []
    for name, step in steps:
        print(f"== {name}", flush=True)
        started = time.monotonic()
        try:
            note, result = step(), "ok"
        except Skipped as skipped:
            note, result = f"SKIPPED: {skipped}", "skipped"
        except (StepFailed, subprocess.TimeoutExpired, OSError) as failed:
            note, result = f"FAILED: {failed}", "FAILED"
        seconds = time.monotonic() - started
        print(f"   {note}\n   {seconds:.1f} s", flush=True)
        results.append((name, result, seconds))
        if name == "clone" and result != "ok":
            break
    print("\nstep" + " " * 48 + "result    seconds")
    for name, result, seconds in results:
        print(f"{name:<52}{result:<10}{seconds:7.1f}")
    print(f"{'total':<62}{sum(s for _, _, s in results):7.1f}")
    return 1 if any(result == "FAILED" for _, result, _ in results) else 0


def clone_head(clone: Path) -> str:
    done = run(f"git clone -q {ROOT} {clone}", ROOT.parent, timeout=300)
    if done.returncode:
        raise StepFailed(done.stdout)
    head = run("git log -1 --format='%h %s'", clone).stdout.strip()
    return f"{clone} at {head[:80]}"


if __name__ == "__main__":
    sys.exit(main())
