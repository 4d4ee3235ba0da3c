"""Wheels of what this environment has installed, so a clean venv installs with no network.

``pip download`` at test time would reach the internet, and ``pip wheel`` needs
sources the environment does not keep. An installed distribution already holds
every file its wheel held (its ``RECORD`` lists them), so it is packed back into
a wheel: same name, version, metadata and tags. Scripts are left out: pip writes
them again from the entry points when it installs the wheel.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zipfile
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

#: Files pip adds at install time; not part of the wheel that was installed.
INSTALL_ONLY = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}


def closure(roots: Iterable[str], extras: Iterable[str] = ()) -> dict[str, metadata.Distribution]:
    """The installed distributions ``roots`` need (with ``extras`` of each root), by name."""
    found: dict[str, metadata.Distribution] = {}
    pending: list[tuple[str, frozenset[str]]] = [(root, frozenset(extras)) for root in roots]
    seen: set[tuple[str, frozenset[str]]] = set()
    while pending:
        name, wanted = pending.pop()
        key = (canonicalize_name(name), wanted)
        if key in seen:
            continue
        seen.add(key)
        dist = metadata.distribution(name)
        found[canonicalize_name(name)] = dist
        for line in dist.requires or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not any(
                requirement.marker.evaluate({**default_environment(), "extra": extra})
                for extra in (wanted or {""})
            ):
                continue
            pending.append((requirement.name, frozenset(requirement.extras)))
    return found


def _hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def _tag(dist_info: Path) -> str:
    """The wheel's compressed tag set (``py2.py3-none-any``), as its file name carries it."""
    wheel = (dist_info / "WHEEL").read_text()
    tags = re.findall(r"^Tag:\s*(\S+)\s*$", wheel, flags=re.MULTILINE) or ["py3-none-any"]
    parts: list[list[str]] = [[], [], []]
    for tag in tags:
        for kept, part in zip(parts, tag.split("-"), strict=True):
            if part not in kept:
                kept.append(part)
    return "-".join(".".join(kept) for kept in parts)


def repack(dist: metadata.Distribution, into: Path) -> Path:
    """Write ``dist`` back as a wheel into the folder ``into``; returns its path."""
    site = Path(str(dist.locate_file("")))
    dist_info = site / next(f for f in dist.files or [] if f.name == "METADATA").parent
    name = canonicalize_name(dist.metadata["Name"]).replace("-", "_")
    version = dist.version
    tag = _tag(dist_info)
    wheel_path = into / f"{name}-{version}-{tag}.whl"
    record: list[str] = []
    with zipfile.ZipFile(wheel_path, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for entry in dist.files or []:
            relative = entry.as_posix()
            source = (site / relative).resolve()
            if relative.startswith("..") or "__pycache__" in relative:
                continue
            if source.parent == dist_info.resolve() and source.name in INSTALL_ONLY:
                continue
            if not source.is_file():
                continue
            data = source.read_bytes()
            wheel.writestr(relative, data)
            record.append(f"{relative},{_hash(data)},{len(data)}")
        record_name = f"{dist_info.name}/RECORD"
        record.append(f"{record_name},,")
        wheel.writestr(record_name, "\n".join(record) + "\n")
    return wheel_path


def wheelhouse(roots: Iterable[str], into: Path, extras: Iterable[str] = ()) -> list[Path]:
    """Wheels of ``roots``' installed dependencies (not the roots themselves) in ``into``."""
    into.mkdir(parents=True, exist_ok=True)
    root_names = {canonicalize_name(root) for root in roots}
    return [
        repack(dist, into)
        for key, dist in sorted(closure(root_names, extras).items())
        if key not in root_names
    ]
