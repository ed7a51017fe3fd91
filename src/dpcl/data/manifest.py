"""``resources/<dataset>/MANIFEST.json``: what ``obtain_dataset`` put there, with a sha256 of every
file, checked whenever the data set is read.

Snakemake tracks only the manifest's timestamp, so files changed under ``resources/`` after
they were obtained (another valid archive, a truncated copy) would otherwise be used silently;
a garbage manifest would rerun everything downstream. :func:`verify_manifest` refuses both by
name, with the fix. Hashing is memoised per process by (path, size, mtime), so a job that reads
a data set several times hashes each file once.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

MANIFEST = "MANIFEST.json"
FORMAT = 2  # 1: no hashes (older dpcl)


class ManifestError(ValueError):
    """A data set's files or manifest are not what ``obtain_dataset`` wrote; names file and fix."""


_HASHED: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _HASHED:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
        _HASHED[key] = h.hexdigest()
    return _HASHED[key]


def data_files(root: Path) -> list[Path]:
    """Every regular file under ``root`` except the manifest, sorted."""
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)


def write_manifest(root: str | Path, dataset: str, listing: dict) -> dict:
    """The manifest of a freshly obtained data set: its name, the loader's listing and the sha256
    of every file under ``root``."""
    from ..io import write_json

    root = Path(root)
    manifest = {
        "format": FORMAT,
        "dataset": dataset,
        "files": listing,
        "sha256": {p.relative_to(root).as_posix(): file_sha256(p) for p in data_files(root)},
    }
    write_json(root / MANIFEST, manifest)
    return manifest


def verify_manifest(root: str | Path, dataset: str) -> None:
    """Check ``root``'s manifest (a dpcl manifest of ``dataset``) and the hash of every file it lists.

    A manifest without hashes (written by an older dpcl) is accepted with a warning; a root
    without a manifest is not checked (library use on hand-placed files)."""
    root = Path(root)
    path = root / MANIFEST
    if not path.is_file():
        return
    fix = f"delete {path} and rerun: obtain_dataset fetches the data set again"
    try:
        manifest = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ManifestError(f"{path} is not a dpcl manifest ({e}); {fix}") from None
    if (
        not isinstance(manifest, dict)
        or not isinstance(manifest.get("files"), dict)
        or "dataset" not in manifest
    ):
        raise ManifestError(f"{path} is not a dpcl manifest (no 'dataset'/'files'); {fix}")
    if manifest["dataset"] != dataset:
        raise ManifestError(
            f"{path} was written for data set {manifest['dataset']!r}, not {dataset!r}; {fix}"
        )
    hashes = manifest.get("sha256")
    if hashes is None:
        warnings.warn(
            f"{path} has no file hashes (written by an older dpcl): the data set's files are not "
            f"verified; {fix} to add them",
            stacklevel=2,
        )
        return
    for rel, want in sorted(hashes.items()):
        p = root / rel
        if not p.is_file():
            raise ManifestError(f"{p}, obtained with {path}, is missing; {fix}")
        if file_sha256(p) != want:
            raise ManifestError(
                f"{p} changed after it was obtained (its sha256 differs from {path}); restore it or {fix}"
            )
