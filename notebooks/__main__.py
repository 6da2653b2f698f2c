"""Execute the figure notebooks headless (jupytext percent .py -> nbclient) and write figures/*.png.

    python -m notebooks                                  # every notebooks/NN_*.py, fresh results/ else results/reference/
    python -m notebooks --only 02_sandbox                # one notebook
    python -m notebooks --results /tmp/r --figures /tmp/f    # another results tree (tests use a tmp copy)

Each notebook runs in a fresh kernel of this interpreter with the repository as working directory; the
executed notebooks (outputs included) are saved beside the figures as <name>.ipynb. A notebook with no
results for a figure prints `no results yet: <path>` and skips it; a notebook that raises fails the run.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m notebooks ...")

from model import cli  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def notebooks(only: list[str] | None) -> list[Path]:
    nbs = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    if only:
        unknown = sorted(set(only) - {p.stem for p in nbs})
        if unknown:
            cli.fail(f"unknown notebook(s) {unknown}: choose from {[p.stem for p in nbs]}")
        nbs = [p for p in nbs if p.stem in only]
    return nbs


def outputs_text(nb) -> str:
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                out.append(o.get("text", ""))
    return "".join(out)


def main(argv=None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("--results", type=Path, default=ROOT / "results", help="fresh results directory")
    ap.add_argument("--reference", type=Path, default=None, help="fallback results (default: <results>/reference)")
    ap.add_argument("--figures", type=Path, default=ROOT / "figures", help="where the PNGs (and executed notebooks) go")
    ap.add_argument("--only", action="append", default=None, metavar="NAME", help="run only this notebook (repeatable)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell")
    a = ap.parse_args(argv)
    import jupytext
    import nbformat
    from jupyter_client.manager import KernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    # the kernels inherit this environment: where to read and write, and the repository on the path
    os.environ.update(NB_RESULTS=str(a.results.resolve()), NB_FIGURES=str(a.figures.resolve()),
                      NB_REFERENCE=str((a.reference or a.results / "reference").resolve()), MPLBACKEND="Agg",
                      PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    a.figures.mkdir(parents=True, exist_ok=True)
    failed, skipped, wrote = [], [], []
    sockets = tempfile.mkdtemp(prefix="nb-kernels-")
    for path in notebooks(a.only):
        t0 = time.perf_counter()
        for attempt in (1, 2):
            nb = jupytext.read(path)
            # unix sockets, not TCP ports: no port races with other processes on a shared machine
            km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(sockets, path.stem))
            client = NotebookClient(nb, km=km, timeout=a.timeout, startup_timeout=120,
                                    resources={"metadata": {"path": str(ROOT)}})
            try:
                client.execute()
                status = "ok"
            except CellExecutionError as e:
                failed.append(path.stem)
                status = "FAILED: " + str(e).strip().splitlines()[-1][:300]
            except RuntimeError as e:  # the kernel itself did not start: once more, then report it
                if attempt == 1:
                    print(f"{path.stem}: kernel did not start ({e}); retrying", flush=True)
                    continue
                failed.append(path.stem)
                status = f"FAILED: kernel did not start: {e}"
            finally:  # nbclient leaves a kernel it did not create running
                if km.has_kernel:
                    km.shutdown_kernel(now=True)
            break
        for i, cell in enumerate(nb.cells):  # the same results give the same file: nbformat's cell ids are random
            cell["id"] = f"cell-{i}"         # and the kernel stamps each cell with wall-clock execution times
            cell.get("metadata", {}).pop("execution", None)
        nbformat.write(nb, a.figures / f"{path.stem}.ipynb")
        text = outputs_text(nb)
        wrote += [ln.split("wrote ", 1)[1] for ln in text.splitlines() if ln.startswith("wrote ")]
        skipped += [f"{path.stem}: {ln}" for ln in text.splitlines() if ln.startswith(("no results yet:", "unrecognised"))]
        print(f"{path.stem:<24} {time.perf_counter() - t0:5.1f} s  {status}", flush=True)
    shutil.rmtree(sockets, ignore_errors=True)
    print(f"figures written ({len(wrote)}):")
    for w in wrote:
        print(f"  {w}")
    if skipped:
        print(f"skipped for lack of results ({len(skipped)}):")
        for s in skipped:
            print(f"  {s}")
    if failed:
        print(f"error: notebooks failed: {failed} (executed copies with tracebacks in {a.figures})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
