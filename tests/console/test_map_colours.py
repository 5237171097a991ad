"""The bundle map's colours (issue 25, item 5): every broker's colour told apart from every
other's by a person with deuteranopia, by the simulation of Machado, Oliveira & Fernandes
(2009, "A Physiologically-based Model for Simulation of Color Vision Deficiency", IEEE TVCG
15(6), severity 1.0) and the CIE 1976 colour difference; the palette is read from the page's
own script."""

import itertools
import re
from pathlib import Path

import numpy as np

SCRIPT = Path(__file__).resolve().parents[2] / "static" / "console" / "pages" / "bundle-map.js"
# Machado et al. (2009), deuteranopia at severity 1.0, on linear RGB.
DEUTERANOPIA = np.array(
    [
        [0.367322, 0.860646, -0.227968],
        [0.280085, 0.672501, 0.047413],
        [-0.011820, 0.042940, 0.968881],
    ]
)
# Two colours closer than this (CIE76 ΔE) are hard to tell apart side by side on a map; the
# palette it replaced had a pair at 0.9 (its green and red) for a deuteranope.
LEAST_DELTA_E = 15.0


def _linear(hex_colour: str) -> np.ndarray:
    c = np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)], dtype=float) / 255
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _lab(linear: np.ndarray) -> np.ndarray:
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    t = (xyz @ linear) / np.array([0.95047, 1.0, 1.08883])
    f = np.where(t > 0.008856, np.cbrt(t), 7.787 * t + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def palette() -> list[str]:
    found = re.search(r"const PALETTE = \[([^\]]*)\]", SCRIPT.read_text())
    assert found, "bundle-map.js defines PALETTE"
    return re.findall(r'"(#[0-9A-Fa-f]{6})"', found.group(1))


def test_eight_brokers_are_told_apart_with_deuteranopia():
    colours = palette()
    assert len(colours) >= 8  # the demo's cluster has eight brokers
    seen = {c: _lab(np.clip(DEUTERANOPIA @ _linear(c), 0, 1)) for c in colours[:8]}
    closest = min(
        (float(np.linalg.norm(seen[a] - seen[b])), a, b) for a, b in itertools.combinations(seen, 2)
    )
    assert closest[0] >= LEAST_DELTA_E, closest


def test_the_simulation_confuses_what_deuteranopes_confuse():
    """The model is not a mirror of the palette: red and green of equal lightness collapse."""
    red, green = _linear("#e15759"), _linear("#59a14f")
    apart = np.linalg.norm(_lab(red) - _lab(green))
    seen = np.linalg.norm(
        _lab(np.clip(DEUTERANOPIA @ red, 0, 1)) - _lab(np.clip(DEUTERANOPIA @ green, 0, 1))
    )
    assert apart > 60
    assert seen < 5
