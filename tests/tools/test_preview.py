"""``lerobot-shards preview``: one self-contained HTML page per pack.

The page is checked for what it must hold (summary, every shown episode's contact sheet and
plots, window validity, escaped dataset strings), then rendered in headless Chromium, which
must load every inlined image and draw a page that is not blank. Without Chromium (Debian's
``chromium``) the browser test is skipped, saying so.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from lerobot_shards import pack_dataset, render_preview
from lerobot_shards.cli import main as cli
from lerobot_shards.testing import CameraSpec, SampleSpec, write_sample_dataset

HOSTILE_TASK = '<img src=x onerror="document.title=1">pick & place'


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    root = tmp_path_factory.mktemp("preview")
    spec = SampleSpec(
        episodes=3,
        lengths=(12, 20, 9),
        tasks=(HOSTILE_TASK, "stack"),
        seed=3,
        cameras=(CameraSpec("observation.images.top", 48, 64), CameraSpec("observation.images.wrist", 32, 32)),
    )
    write_sample_dataset(root / "src", spec)
    pack_dataset(str(root / "src"), str(root / "pack"), windows={"chunk": {"action": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]}})
    return root / "pack"


def test_the_page_shows_every_episode_camera_plot_and_window(pack):
    page, report = render_preview(str(pack), frames_per_episode=4)
    assert (report.episodes_shown, report.episodes_total) == (3, 3)
    assert page.count("<img ") == 3 * 2 * 4 == report.frames_decoded
    assert page.count("<section>") == 3 and page.count('class="plot"') >= 3 * 2  # state and action per episode
    assert "anchors with the full window" in page and re.search(r"<td>chunk</td><td>.*</td><td>\d+ of 41 ", page)
    assert HOSTILE_TASK not in page and "&lt;img src=x onerror=&quot;document.title=1&quot;&gt;pick &amp; place" in page


def test_the_cli_reads_only_the_episodes_it_shows(pack, tmp_path):
    result = CliRunner().invoke(cli, ["preview", str(pack), "-o", str(tmp_path / "p.html"), "--episodes", "1", "--frames", "2"])
    assert result.exit_code == 0, result.output
    assert "1 of 3 episodes, 4 frames decoded" in result.output
    assert (tmp_path / "p.html").read_text().count("<img ") == 4


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


# A hang guard, not a speed check: Chromium takes about a second here when the machine is
# quiet, but once sat past 120 s while the rest of the suite loaded both cores.
_BROWSER_GUARD_S = 600


def _run_browser(args: list[str], tmp_path: Path, name: str) -> str:
    """Run Chromium in its own session with output to a file; returns its stdout.

    On the guard's expiry the whole session gets SIGTERM, never SIGKILL (what
    ``subprocess.run(timeout=...)`` sends), so the zygotes shut down rather than linger. (The
    SCHED_FIFO 99 browsers once seen here had inherited it from a test process that libsvtav1
    had made real-time: ``lerobot_shards.testing.video`` now puts such threads back.)
    """
    out, err = tmp_path / f"{name}.out", tmp_path / f"{name}.err"
    with open(out, "wb") as stdout, open(err, "wb") as stderr:
        browser = subprocess.Popen([_chromium(), *args], stdout=stdout, stderr=stderr, start_new_session=True)
        try:
            code = browser.wait(timeout=_BROWSER_GUARD_S)
        except subprocess.TimeoutExpired:
            os.killpg(browser.pid, signal.SIGTERM)
            browser.wait(timeout=60)
            pytest.fail(f"Chromium ({name}) did not finish in {_BROWSER_GUARD_S} s: {err.read_text(errors='replace')[-500:]}")
    assert code == 0, f"Chromium ({name}) exited {code}: {err.read_text(errors='replace')[-500:]}"
    return out.read_text(errors="replace")


@pytest.mark.skipif(
    _chromium() is None, reason="Chromium is not installed (apt-get install chromium): the browser rendering test needs it"
)
def test_headless_chromium_loads_every_image_and_draws_a_page(pack, tmp_path):
    from PIL import Image, ImageStat

    page, _ = render_preview(str(pack), frames_per_episode=3)
    path = tmp_path / "preview.html"
    path.write_text(page)
    common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--virtual-time-budget=5000",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dom = _run_browser([*common, "--dump-dom", path.as_uri()], tmp_path, "dump-dom")
    loaded = re.search(r'data-images-loaded="(\d+)/(\d+)"', dom)
    assert loaded, dom[:500]
    assert loaded.group(1) == loaded.group(2) == str(3 * 2 * 3)
    assert "<title>lerobot-shards preview" in dom  # the hostile task did not run (it would set the title)
    shot = tmp_path / "shot.png"
    _run_browser([*common, "--window-size=1200,1600", f"--screenshot={shot}", path.as_uri()], tmp_path, "screenshot")
    image = Image.open(shot).convert("L")
    stats = ImageStat.Stat(image)
    assert stats.stddev[0] > 10, "the rendered page is blank"
