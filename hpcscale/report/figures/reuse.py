"""Figures reused by what they are drawn from (#28): a report rebuilt from the same data builds
no matplotlib Figure at all.

A figure function (`style.styled`) gets plain data: frames, lists, strings. While a report is
built `reusing` the figures of its previous run, each call's inputs are digested before anything
is drawn: the function's name, its arguments (pickled, every object of an allowed library: a
matplotlib object, a callable defined in a function, anything else that could draw differently
from what it pickles to, is not digested), the drawing environment (matplotlib's version, its
global rcParams and default font), the source of the hpcscale package (a figure function edited
is another figure) and VERSION. A PNG this module helped write carries that digest and the note
the figure returned with (`fold.with_note`) in a text chunk; when a previous PNG holds the
digest, the call returns a `ReusedFigure` with its bytes instead of drawing: the same function
of the same inputs in the same environment draws the same figure. A call whose function
returned None wrote no PNG: its digest is kept in NOTHING_FILE, and the same call returns None
again without being called. The environment a fresh import of matplotlib gives is kept in
ENVIRONMENT_FILE under the stats of the files that make it: a report whose figures are all
reused imports no matplotlib at all (#28).

The digest describes the figure only as the function returned it. A Figure changed afterwards
(a label relabelled, a note added: its content digest, `digest`, is taken on return and again
when the PNG is written) is written without the chunk, and a `ReusedFigure` that is touched
(any attribute but its note) builds its Figure from the pickled inputs and is then drawn as any
other (render.figure_pngs, reusing by the content digest).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import importlib.util
import io
import json
import os
import pickle
import struct
import sys
import weakref
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcscale.formats.atomic import atomic_write

if TYPE_CHECKING:
    from matplotlib.figure import Figure

VERSION = "1"  # bump when what an input digest covers changes
CONTENT_VERSION = "1"  # bump when what a content digest (`digest`) covers changes
INPUTS_KEY = "hpcscale inputs"  # the PNG text chunk: ASCII JSON {"digest", "note"}
NOTE_ATTR = "_hpcscale_note"  # fold.with_note's attribute: the note a figure carries
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_END = b"\0\0\0\0IEND\xaeB`\x82"  # a whole PNG ends with it (one cut short is not reused)
# the libraries whose objects pickle to what they hold (classes, functions: by their name)
ALLOWED = frozenset(
    {"builtins", "collections", "copyreg", "datetime", "numpy", "pandas", "pathlib", "pyarrow",
     "hpcscale", "zoneinfo", "decimal", "_codecs", "enum", "dateutil", "pytz"}
)  # fmt: skip
PACKAGE = Path(__file__).resolve().parents[2]  # hpcscale/
ENVIRONMENT_FILE = ".drawing-environment.json"  # in the figures directory: `_Previous.environment`
NOTHING_FILE = ".nothing-drawn.json"  # in the figures directory: `_Previous.drew_nothing`
NOTHING_KEPT = 1000  # digests of calls that drew nothing kept there, the latest first


class _Hash(io.RawIOBase):
    """A write-only file that hashes what is written (the pickler streams into it)."""

    def __init__(self) -> None:
        self.hash = hashlib.blake2b(digest_size=20)

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self.hash.update(data)
        return len(data)


def drawing_environment(dpi: int) -> bytes:
    """What matplotlib reads at draw time rather than from the figure: its version, the global
    rcParams now (read raw: reading `backend` would pick one), the PNG's DPI, the default font."""
    import matplotlib
    from matplotlib import font_manager

    rc = sorted((k, repr(v)) for k, v in dict.items(matplotlib.rcParams) if k != "backend")
    font = font_manager.findfont(font_manager.FontProperties())
    return repr((CONTENT_VERSION, matplotlib.__version__, dpi, rc, font)).encode()


def digest(fig: Figure, environment: bytes) -> str | None:
    """The built figure's content digest (render's module docstring), or None when it does not
    pickle."""
    sink = _Hash()
    sink.hash.update(environment)
    try:
        _content_pickler()(sink, protocol=5).dump(fig)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return None
    return sink.hash.hexdigest()


@functools.cache
def _content_pickler() -> type[pickle.Pickler]:
    """The pickler of `digest` (matplotlib imported when a figure is digested, not before)."""
    from matplotlib.cbook import CallbackRegistry
    from matplotlib.transforms import TransformNode

    class ContentPickler(pickle.Pickler):
        """Pickles a figure by what it draws only: a transform's `_parents` (weak references
        keyed by id(), different in every process) say which transforms depend on it, and a
        callback registry (which pickling advances: its next id) what to tell of later
        changes; neither is what is drawn now."""

        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, TransformNode):
                state = obj.__getstate__()
                state.pop("_parents", None)
                return object.__new__, (type(obj),), state
            if isinstance(obj, CallbackRegistry):
                return CallbackRegistry, ()
            return NotImplemented

    return ContentPickler


@functools.cache
def source_digest() -> str:
    """The hpcscale package's source (every .py file): a figure function, or what it calls,
    edited draws another figure from the same inputs."""
    h = hashlib.blake2b(digest_size=20)
    for path in sorted(PACKAGE.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


class _InputPickler(pickle.Pickler):
    """Pickles only objects of the ALLOWED libraries (PicklingError otherwise)."""

    def reducer_override(self, obj: Any) -> Any:
        kind = obj if isinstance(obj, type) else type(obj)
        module = getattr(obj, "__module__", None) if callable(obj) else kind.__module__
        if str(module).split(".")[0] not in ALLOWED or "<locals>" in str(
            getattr(obj, "__qualname__", "")
        ):
            raise pickle.PicklingError(f"not digested: {kind.__module__}.{kind.__qualname__}")
        return NotImplemented


@dataclass(frozen=True)
class Inputs:
    """A figure call's arguments, pickled, and the digest of everything that draws it."""

    digest: str
    blob: bytes


def inputs_of(
    fn: Callable[..., Any],
    args: tuple,
    kwargs: Mapping[str, Any],
    dpi: int,
    environment: str | None = None,
) -> Inputs | None:
    """The call's `Inputs`, or None when an argument is not digested (see the module);
    `environment`: `drawing_environment(dpi)` as text when the caller knows it."""
    buf = io.BytesIO()
    try:
        _InputPickler(buf, protocol=5).dump((args, dict(kwargs)))
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError, ValueError):
        return None
    blob = buf.getvalue()
    h = hashlib.blake2b(digest_size=20)
    name = f"{fn.__module__}.{fn.__qualname__}"
    if environment is None:
        environment = drawing_environment(dpi).decode()
    for part in (VERSION, name, source_digest(), environment, "\0"):
        h.update(part.encode() + b"\0")
    h.update(blob)
    return Inputs(h.hexdigest(), blob)


def text_chunks(png: bytes) -> dict[str, str]:
    """The tEXt chunks before the image data (where ours are written), by key; {} for bytes
    that are not a PNG. A chunk cut short is not read."""
    if not png.startswith(PNG_SIGNATURE):
        return {}
    out: dict[str, str] = {}
    pos = len(PNG_SIGNATURE)
    while pos + 8 <= len(png):
        size, kind = struct.unpack_from(">I4s", png, pos)
        if kind == b"IDAT":
            break
        body = png[pos + 8 : pos + 8 + size]
        if kind == b"tEXt" and len(body) == size and b"\0" in body:
            key, _, value = body.partition(b"\0")
            out.setdefault(key.decode("latin-1"), value.decode("latin-1"))
        pos += 12 + size
    return out


def with_text(png: bytes, chunks: Mapping[str, str]) -> bytes:
    """`png` with these tEXt chunks (latin-1) after its header, in place of any it had under
    the same keys; the same bytes when it has them already or is not a PNG."""
    if not chunks or all(text_chunks(png).get(k) == v for k, v in chunks.items()):
        return png
    if not png.startswith(PNG_SIGNATURE) or png[12:16] != b"IHDR":
        return png
    keys = {k.encode("latin-1") + b"\0" for k in chunks}
    pos = len(PNG_SIGNATURE)
    parts = [PNG_SIGNATURE]
    while pos + 8 <= len(png):
        size, kind = struct.unpack_from(">I4s", png, pos)
        chunk = png[pos : pos + 12 + size]
        if not (kind == b"tEXt" and any(chunk[8:].startswith(k) for k in keys)):
            parts.append(chunk)
        if kind == b"IHDR":
            for key, value in chunks.items():
                body = key.encode("latin-1") + b"\0" + value.encode("latin-1")
                crc = zlib.crc32(b"tEXt" + body)
                parts.append(
                    struct.pack(">I4s", len(body), b"tEXt") + body + struct.pack(">I", crc)
                )
        pos += 12 + size
    return b"".join(parts)


def inputs_chunk(png: bytes) -> tuple[str, str] | None:
    """(digest, note) of the inputs chunk in a PNG, or None."""
    try:
        got = json.loads(text_chunks(png).get(INPUTS_KEY, "null"))
    except ValueError:
        return None
    if not isinstance(got, dict):
        return None
    d, note = got.get("digest"), got.get("note", "")
    return (d, note) if isinstance(d, str) and isinstance(note, str) else None


def _stat(path: str | os.PathLike[str]) -> list[int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode]


def fresh_import_key() -> str | None:
    """What a fresh `import matplotlib` reads to make its rcParams and default font, as file
    stats (None: a font list it would build anew, or no matplotlib): the package's own files
    and defaults (mpl-data/matplotlibrc), every place a matplotlibrc is looked for (the working
    directory, $MATPLOTLIBRC, the config directories) and the font list cache it loads
    (fontlist-v*.json in the cache directories, which must be writable: else matplotlib builds
    one in a temporary directory)."""
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or spec.origin is None:
        return None
    pkg = os.path.dirname(spec.origin)
    env = {k: os.environ.get(k) for k in
           ("MATPLOTLIBRC", "MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "HOME",
            "LOCALAPPDATA", "MATPLOTLIBDATA")}  # fmt: skip
    home = os.path.expanduser("~")
    rc = ["matplotlibrc", os.path.join(pkg, "mpl-data", "matplotlibrc")]
    configs = [os.path.join(home, ".config", "matplotlib"), os.path.join(home, ".matplotlib")]
    caches = [os.path.join(home, ".cache", "matplotlib"), os.path.join(home, ".matplotlib")]
    if env["MATPLOTLIBRC"]:
        rc += [env["MATPLOTLIBRC"], os.path.join(env["MATPLOTLIBRC"], "matplotlibrc")]
    for var, under in (("MPLCONFIGDIR", ""), ("LOCALAPPDATA", "matplotlib")):
        if env[var]:
            configs.append(os.path.join(env[var], under))
            caches.append(os.path.join(env[var], under))
    if env["XDG_CONFIG_HOME"]:
        configs.append(os.path.join(env["XDG_CONFIG_HOME"], "matplotlib"))
    if env["XDG_CACHE_HOME"]:
        caches.append(os.path.join(env["XDG_CACHE_HOME"], "matplotlib"))
    rc += [os.path.join(d, "matplotlibrc") for d in configs]
    fonts = []
    for d in caches:
        try:
            names = sorted(n for n in os.listdir(d) if n.startswith("fontlist-v"))
        except OSError:
            continue
        if names and not os.access(d, os.W_OK):
            return None
        fonts += [[os.path.join(d, n), _stat(os.path.join(d, n))] for n in names]
    if not fonts:
        return None
    files = ("__init__.py", "_version.py", "rcsetup.py", "font_manager.py")
    key = [
        VERSION, sys.version, sys.platform, os.getcwd(), env, pkg,
        [[f, _stat(os.path.join(pkg, f))] for f in files],
        [[f, _stat(f)] for f in rc],
        fonts,
    ]  # fmt: skip
    return hashlib.blake2b(json.dumps(key).encode(), digest_size=20).hexdigest()


class _Previous:
    """The PNGs of a report's figures directory by their inputs digest (read on first use), and
    the drawing environment a fresh import of matplotlib gives (`environment`)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._by_digest: dict[str, tuple[bytes, str]] | None = None
        self._environments: dict[int, str] = {}  # dpi -> a fresh import's, from the file
        self._environment_file: dict[str, Any] | None = None  # to write (`save`)
        self._nothing_before: list[str] | None = None  # NOTHING_FILE's digests (read on use)
        self.nothing_now: dict[str, None] = {}  # digests of calls that drew nothing this time

    def drew_nothing(self, key: str) -> bool:
        """Whether a call with this inputs digest returned None before (NOTHING_FILE): the same
        function of the same inputs in the same environment returns None again, so it is not
        called (a figure function that draws nothing decides so before any matplotlib)."""
        if self._nothing_before is None:
            self._nothing_before = self._nothing_file()
        return key in self._nothing_before

    def _nothing_file(self) -> list[str]:
        try:
            got = json.loads((self.directory / NOTHING_FILE).read_text("utf-8"))
        except (OSError, ValueError):
            return []
        return got if isinstance(got, list) and all(isinstance(d, str) for d in got) else []

    def save_nothing(self) -> None:
        """NOTHING_FILE: this build's calls that drew nothing, then those it held (another
        campaign's, in a report of several), NOTHING_KEPT at most; unchanged: not written."""
        before = self._nothing_file()  # now: another campaign's build may have written it
        new = [d for d in self.nothing_now if d not in before]
        if new and self.directory.is_dir():
            kept = [*new, *before][:NOTHING_KEPT]
            with contextlib.suppress(OSError):
                atomic_write(self.directory / NOTHING_FILE, json.dumps(kept))

    def environment(self, dpi: int) -> str:
        """`drawing_environment(dpi)` as text. While matplotlib is not imported in this process
        it is the one a fresh import gives, kept in ENVIRONMENT_FILE under the stats that make
        it (`fresh_import_key`): a report whose figures are all reused imports no matplotlib
        (#28). Once it is imported (a figure drawn, or a caller's own rcParams), it is read."""
        if "matplotlib" in sys.modules:
            return drawing_environment(dpi).decode()
        if dpi in self._environments:
            return self._environments[dpi]
        key = fresh_import_key()
        path = self.directory / ENVIRONMENT_FILE
        stored: dict[str, Any] = {}
        if key is not None:
            try:
                got = json.loads(path.read_text("utf-8"))
            except (OSError, ValueError):
                got = None
            if isinstance(got, dict) and got.get("key") == key:
                stored = got
                envs, font = got.get("environments"), got.get("font")
                found = envs.get(str(dpi)) if isinstance(envs, dict) else None
                font_same = isinstance(font, list) and len(font) == 2
                # the default font's file unchanged too: else a fresh import would look again
                if isinstance(found, str) and font_same and _stat(str(font[0])) == font[1]:
                    self._environments[dpi] = found
                    return found
        text = drawing_environment(dpi).decode()  # the first import: a fresh one
        if key is not None and key == fresh_import_key():
            from matplotlib import font_manager

            font = font_manager.findfont(font_manager.FontProperties())
            envs = stored.get("environments") if stored.get("key") == key else None
            self._environment_file = {
                "key": key,
                "font": [font, _stat(font)],
                "environments": {**(envs if isinstance(envs, dict) else {}), str(dpi): text},
            }  # written by `save`, once the figures directory is there
        return text

    def save(self) -> None:
        """Keep what this build learnt for the next (ENVIRONMENT_FILE, NOTHING_FILE) in the
        figures directory, once it exists: after the first report's figures are written too."""
        if not self.directory.is_dir():
            return
        if self._environment_file is not None:
            with contextlib.suppress(OSError):
                atomic_write(self.directory / ENVIRONMENT_FILE, json.dumps(self._environment_file))
            self._environment_file = None
        self.save_nothing()

    def find(self, key: str) -> tuple[bytes, str] | None:
        if self._by_digest is None:
            self._by_digest = {}
            for path in sorted(self.directory.glob("*.png")) if self.directory.is_dir() else []:
                try:
                    png = path.read_bytes()  # read once: what is checked is what is reused
                except OSError:
                    continue
                if png.endswith(PNG_END) and (got := inputs_chunk(png)) is not None:
                    self._by_digest.setdefault(got[0], (png, got[1]))
        return self._by_digest.get(key)


_ACTIVE: contextvars.ContextVar[_Previous | None] = contextvars.ContextVar(
    "hpcscale_figure_reuse", default=None
)


@contextlib.contextmanager
def reusing(figures_dir: Path) -> Iterator[_Previous]:
    """Figure functions called inside reuse the PNGs in `figures_dir` drawn from the same
    inputs (`ReusedFigure`s); the Figures they build are remembered for the chunk. What the
    next build can use is kept there on the way out (`_Previous.save`; a directory that is not
    there yet: call `save` again once the figures are written)."""
    previous = _Previous(figures_dir)
    token = _ACTIVE.set(previous)
    try:
        yield previous
    finally:
        _ACTIVE.reset(token)
    previous.save()


@dataclass(frozen=True)
class _Drawn:
    inputs: str  # the inputs digest
    content: str  # the content digest on return
    note: str  # the note on return


_DRAWN: weakref.WeakKeyDictionary[Any, _Drawn] = weakref.WeakKeyDictionary()


def reused_or_drawn(
    fn: Callable[..., Figure | None], args: tuple, kwargs: Mapping[str, Any], dpi: int
) -> Figure | ReusedFigure | None:
    """`fn(*args, **kwargs)`, or while `reusing`, the PNG a previous call with the same inputs
    drew (see the module)."""
    previous = _ACTIVE.get()
    inputs = (
        inputs_of(fn, args, kwargs, dpi, previous.environment(dpi))
        if previous is not None
        else None
    )
    if previous is None or inputs is None:
        return fn(*args, **kwargs)
    hit = previous.find(inputs.digest)
    if hit is not None:
        return ReusedFigure(fn, inputs, *hit)
    if previous.drew_nothing(inputs.digest):
        previous.nothing_now[inputs.digest] = None
        return None
    fig = fn(*args, **kwargs)
    if fig is None:
        previous.nothing_now[inputs.digest] = None
    else:
        content = digest(fig, drawing_environment(dpi))
        if content is not None:
            _DRAWN[fig] = _Drawn(inputs.digest, content, str(getattr(fig, NOTE_ATTR, "")))
    return fig


def chunk_for(fig: Any, content: str | None) -> dict[str, str]:
    """The inputs chunk to write into `fig`'s PNG: none unless it is, as its `content` digest
    says, the figure its function returned."""
    drawn = _DRAWN.get(fig)
    if drawn is None or content is None or drawn.content != content:
        return {}
    return {INPUTS_KEY: json.dumps({"digest": drawn.inputs, "note": drawn.note})}


class ReusedFigure:
    """A figure whose PNG was drawn before from the same inputs: its bytes (`reused_png`) and
    note, no Figure. Touched (any other attribute), it builds its Figure from the inputs and
    stands for it (`built`), which is then drawn as any other."""

    def __init__(self, fn: Callable[..., Figure | None], inputs: Inputs, png: bytes, note: str):
        object.__setattr__(self, "_hpcscale_reuse", (fn, inputs, png))
        object.__setattr__(self, "_hpcscale_figure", None)
        if note:
            object.__setattr__(self, NOTE_ATTR, note)

    @property
    def reused_png(self) -> bytes | None:
        """The reused bytes; None once touched (the Figure is drawn then)."""
        return None if self._hpcscale_figure is not None else self._hpcscale_reuse[2]

    def built(self) -> Figure:
        """The Figure, built from the pickled inputs on first use."""
        if self._hpcscale_figure is None:
            fn, inputs, _ = self._hpcscale_reuse
            args, kwargs = pickle.loads(inputs.blob)
            fig = fn(*args, **kwargs)
            if fig is None:
                raise RuntimeError(f"{fn.__qualname__} drew nothing from inputs it drew before")
            object.__setattr__(self, "_hpcscale_figure", fig)
        return self._hpcscale_figure

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_hpcscale"):  # our own attributes, the note: never the Figure's
            raise AttributeError(name)
        return getattr(self.built(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith("_hpcscale"):
            object.__setattr__(self, name, value)
        else:
            setattr(self.built(), name, value)


def resolved(fig: Any) -> Any:
    """A touched `ReusedFigure`'s Figure; anything else as it is."""
    return fig.built() if isinstance(fig, ReusedFigure) and fig.reused_png is None else fig
