"""The HTML page as a browser shows it: rendered by headless Chromium, screenshot inspected."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from slurm_fair.report import render, tables

from . import tiny

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1280, 2000


def screenshot(html_path, png_path, profile) -> None:
    argv = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        f"--user-data-dir={profile}", f"--screenshot={png_path}", f"--window-size={WIDTH},{HEIGHT}",
        html_path.as_uri(),
    ]
    subprocess.run(argv, check=True, capture_output=True, timeout=120)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_html_report_renders_in_chromium(tmp_path):
    from PIL import Image

    html = tmp_path / "report.html"
    html.write_text(render.render_html(tables.build(tiny.inputs())), encoding="utf-8")
    png = tmp_path / "report.png"
    screenshot(html, png, tmp_path / "profile")
    assert png.is_file()
    img = Image.open(png).convert("RGB")
    assert img.size == (WIDTH, HEIGHT)
    # RGB triples, row by row (get_flattened_data in newer Pillow, getdata before it)
    pixels = list(getattr(img, "get_flattened_data", img.getdata)())
    non_white = sum(1 for p in pixels if min(p) < 235)
    colours = len(set(pixels))
    # text, tables and two charts: far from a blank page
    assert non_white > 0.05 * len(pixels), non_white
    assert colours > 500, colours
    # the charts' orange bars (received share) are visible: many strongly orange pixels
    orange = sum(1 for r, g, b in pixels if r > 180 and 60 < g < 140 and b < 80)
    assert orange > 2000, orange
