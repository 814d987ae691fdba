"""Screenshot a run's `report.html` as a user sees it at a given window width, in headless Chromium (Debian's
`chromium`; `make system-deps` installs it), the whole page top to bottom.

    python docs/images/screenshot.py RUN_DIR OUT.png [--width 1400]

Chromium draws a window of a fixed height; the page is drawn into a tall one and the blank rows below its end
are cropped. The screenshots in this folder were made this way.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from PIL import Image, ImageChops

TALL = 16000  # pixels: taller than any report


def screenshot(page: Path, out: Path, width: int) -> tuple[int, int]:
    """Draw `page` at `width` into `out`; returns the cropped image's size."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("chromium is not installed (make system-deps)")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--no-first-run", f"--user-data-dir={profile}", "--proxy-server=http://127.0.0.1:9",
                        "--virtual-time-budget=10000", f"--window-size={width},{TALL}",
                        f"--screenshot={out}", page.resolve().as_uri()],
                       check=True, capture_output=True, timeout=180)
    image = Image.open(out).convert("RGB")
    blank = Image.new("RGB", image.size, image.getpixel((image.width - 1, image.height - 1)))
    box = ImageChops.difference(image, blank).getbbox()
    bottom = min(image.height, (box[3] if box else image.height) + 24)
    shot = image.crop((0, 0, width, bottom)).quantize(colors=128)  # a page of flat colours: a small PNG
    shot.save(out, optimize=True)
    return width, bottom


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--width", type=int, default=1400)
    args = parser.parse_args()
    size = screenshot(args.run_dir / "report.html", args.out, args.width)
    print(f"{args.out}: {size[0]} x {size[1]} pixels")


if __name__ == "__main__":
    main()
