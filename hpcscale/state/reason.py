"""Why a run ended without success, in the job's own words: the line of its output that says it.

Pure functions over output text, so every kind of failure is tested on real-looking output:
- the scheduler's verdict wins (SLURM's `*** JOB 12 ON n1 CANCELLED AT ... DUE TO TIME LIMIT ***`,
  an OOM kill): whatever the dying job printed after it is a consequence;
- else the job's last error line: a Python exception's last line (chained: the final one), an
  argparse-style `prog: error: ...`, a shell's `command not found`;
- under an MPI abort (Open MPI's, MPICH's or srun's closing block) the first such line instead:
  the rank that failed first said why, the others died of it, and the launcher's boilerplate says
  nothing of the cause;
- ranks that print the same error together glue it into one line (`print` writes the text and its
  newline apart, so two ranks give "AA\n\n"): a line is cut where its own opening recurs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from hpcscale.state.states import RunState
from hpcscale.util.text import printable

MAX_CHARS = 300  # a reason is one line in a table: long exception texts are cut
READ_BYTES = 128 * 1024  # of each output file's end: an abort's first cause is near the end

# Open MPI's --tag-output marks (anywhere: it tags each write, and a line can be several)
_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
_LABEL = re.compile(r"^\d+: ")  # srun --label
_SLURM_VERDICT = re.compile(
    r"\*\*\* ((?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+(?: DUE TO [^*]*?)?)\s*\*\*\*"
)
_OOM = re.compile(r"Detected \d+ oom[-_ ]kill event", re.IGNORECASE)
_MPI_ABORT = re.compile(
    r"mpirun detected that one or more processes exited with non-zero status"
    r"|Primary job\s+terminated normally, but \d+ process(?:es)? returned"
    r"|MPI_ABORT was invoked on rank"
    r"|mpirun noticed that process rank"
    r"|BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES"
    r"|srun: error: \S+: tasks? [\d,-]+: (?:Exited with exit code|Killed|Terminated)"
)
# launchers' and daemons' own lines: boilerplate around a failure, never its cause
_LAUNCHER = re.compile(r"^(?:srun|slurmstepd|mpirun|mpiexec|orted|prterun|prte|salloc)\b")
_PROG_ERROR = re.compile(r"^[\w.\-/]+: error: \S")  # argparse, train.py's one-line errors
_PLAIN_ERROR = re.compile(r"^(?:error|Error|ERROR|fatal|Fatal|FATAL)\b:?\s")
_SHELL = re.compile(  # bash's own errors, `set -u` included
    r"line \d+: .*(?:command not found|No such file or directory|Permission denied"
    r"|unbound variable)"
)
_HPCSCALE = re.compile(r"^hpcscale: \S")  # the array wrapper's own refusals
# an interpreter that could not start the program: `python3: can't open file '/x/t.py': ...`
_CANNOT_START = re.compile(r"^\S+: (?:can't open file |No module named |cannot execute)")
# what an Open MPI block names after its sentence (`Executable: pythn`, `Node: n1`)
_BLOCK_DETAIL = re.compile(r"^(?:Executable|Node|Host|Hostname|File|Application|Local host):\s*\S")
_EXCEPTION = re.compile(r"^(?:\w+\.)*\w*(?:Error|Exception|Exit|Interrupt|Fault)\b")
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?::|$)")  # ends a traceback
# a C++ exception's trail (torch's c10): where it was thrown and its stack, never the cause,
# which the Python exception after it says (`DistStoreError: Timed out ... 1/2 clients joined`)
_CPP_TRAIL = re.compile(r"^(?:Exception raised from \S+ at |frame #\d+: )")


def clean_lines(text: str) -> list[str]:
    """Output lines without terminal escapes (colour, OSC titles and links), control
    characters, launcher tags or trailing blanks."""
    return [_LABEL.sub("", _TAG.sub("", printable(ln))).rstrip() for ln in text.splitlines()]


def scheduler_verdict(lines: Sequence[str]) -> str | None:
    """The scheduler's reason for ending the job, if it printed one (OOM kill before a
    cancellation: the kill is what made SLURM end the step)."""
    for ln in lines:
        if _OOM.search(ln):
            return _short(re.sub(r"^slurmstepd: error:\s*", "", ln.strip()))
    for ln in lines:
        if m := _SLURM_VERDICT.search(ln):
            return _short(m.group(1).strip())
    return None


def error_lines(lines: Sequence[str]) -> list[str]:
    """Each line that states an error, in output order: exceptions (the line after a
    traceback's frames, or one that names an ...Error at the start of a line), `prog: error:`
    lines and shell errors. Launcher boilerplate and Open MPI's dashed blocks are skipped."""
    found: list[str] = []
    in_block = in_traceback = False
    for ln in lines:
        s = ln.strip()
        if s.startswith("-----") and len(s) >= 20:  # Open MPI's help blocks
            in_block = not in_block
            continue
        if in_block or not s:
            continue
        if s.startswith("Traceback (most recent call last)"):
            in_traceback = True
            continue
        if in_traceback:
            if ln[:1].isspace():  # frames, code and ^^^ markers are indented
                continue
            in_traceback = False
            if _EXCEPTION_LINE.match(s):  # else another rank's line cut in: read it as one
                found.append(unglue(s))
                continue
        if _LAUNCHER.match(s) or _CPP_TRAIL.match(s):
            continue
        patterns = (_PROG_ERROR, _PLAIN_ERROR, _SHELL, _HPCSCALE, _EXCEPTION, _CANNOT_START)
        if any(p.search(s) for p in patterns):
            found.append(unglue(s))
    return found


def unglue(line: str) -> str:
    """The first of several ranks' error lines written into one: cut where the line's opening
    (up to its first ": ", e.g. "train.py: " or "ValueError: ") starts again straight after a
    non-blank character; a message that quotes another error ("...: ValueError: ...") stays."""
    head, sep, _ = line.partition(": ")
    if not sep or not head:
        return line
    prefix = head + sep
    cut = line.find(prefix, len(prefix))
    while cut > 0 and line[cut - 1].isspace():
        cut = line.find(prefix, cut + 1)
    return line[:cut] if cut > 0 else line


def launcher_complaint(lines: Sequence[str]) -> str | None:
    """The first Open MPI block that is not the generic "a process failed" notice, as one
    line: its first sentence whole (it wraps over several lines) and what it names after it
    (`Executable: pythn`): what mpirun itself could not do (start an executable, find a host)."""
    blocks: list[list[str]] = []
    in_block = False
    for ln in lines:
        s = ln.strip()
        if s.startswith("-----") and len(s) >= 20:
            in_block = not in_block
            if in_block:
                blocks.append([])
            continue
        if in_block:
            blocks[-1].append(s)
    for block in blocks:
        text = list(block)
        while text and not text[0]:
            text.pop(0)
        if not text or _MPI_ABORT.search(text[0]):
            continue
        para = " ".join(s for s in text[: text.index("")] if s) if "" in text else " ".join(text)
        sentence = para.split(". ")[0].rstrip(".") + "."
        details = [" ".join(s.split()) for s in text if _BLOCK_DETAIL.match(s)]
        return " ".join([sentence, *(f"({d})" for d in details)])
    return None


def reason_from_output(text: str) -> str | None:
    """The line of a failed job's output that says why (see the module), or None when it has
    none (a job killed without a word, an empty output)."""
    lines = clean_lines(text)
    if verdict := scheduler_verdict(lines):
        return verdict
    errors = error_lines(lines)
    if not errors:
        complaint = launcher_complaint(lines)
        return _short(complaint) if complaint else None
    aborted = any(_MPI_ABORT.search(ln) for ln in lines)
    return _short(errors[0] if aborted else errors[-1])


def explain(
    state: RunState,
    text: str | None,
    detail: str | None = None,
    exit_code: str | None = None,
) -> str:
    """A run's reason for the status table: the scheduler's verdict, else (for a run cancelled
    or lost by the user's or hpcscale's own act) what the ledger recorded, else the job's own
    error line, else what the ledger recorded, else the state and exit code."""
    lines = clean_lines(text or "")
    if verdict := scheduler_verdict(lines):
        return verdict
    if state in (RunState.CANCELLED, RunState.LOST) and detail:
        return detail
    if own := reason_from_output(text or ""):
        return own
    if detail:
        return detail
    said = "no output" if not (text or "").strip() else "no error line in its output"
    code = f", exit code {exit_code}" if exit_code not in (None, "") else ""
    return f"{state}{code}; {said}"


def read_outputs(paths: Iterable[Path], max_bytes: int = READ_BYTES) -> str | None:
    """The ends of a run's output files, joined (None when none can be read)."""
    parts = []
    for path in paths:
        try:
            with open(path, "rb") as fh:
                size = fh.seek(0, 2)
                fh.seek(max(0, size - max_bytes))
                data = fh.read()
        except OSError:
            continue
        if size > max_bytes:  # the first line read is a piece of one
            data = data.partition(b"\n")[2]
        parts.append(data.decode(errors="replace"))
    return "\n".join(parts) if parts else None


def _short(line: str) -> str:
    return line if len(line) <= MAX_CHARS else line[: MAX_CHARS - 1] + "…"
