"""The library's documentation: every public name has a README row and a docs/ section with an
example, and every example on the pages runs as written.

The pages' Python blocks run in a fresh process (they make their own 8 devices,
as a script does): each page's blocks in order in one namespace, as a reader
would paste them.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import conformance.assertions
import conformance.devices
import conformance.strategies
from tests.kit_process import ROOT, child_env

PAGES = {
    "strategies": conformance.strategies,
    "assertions": conformance.assertions,
    "devices": conformance.devices,
}
README = (ROOT / "README.md").read_text()


def _sections(page: str) -> dict[str, str]:
    """Heading name -> the section's text, for the ``## name`` sections of docs/<page>.md."""
    text = (ROOT / "docs" / f"{page}.md").read_text()
    parts = re.split(r"^## (\S+)\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize("page", list(PAGES))
def test_every_public_name_has_a_readme_row_and_a_section_with_an_example(page: str) -> None:
    sections = _sections(page)
    for name in PAGES[page].__all__:
        assert name in sections, f"docs/{page}.md has no '## {name}' section"
        assert "```python\n" in sections[name], f"docs/{page}.md's {name} section has no example"
        link = f"[`{name}`](docs/{page}.md#{name.lower()})"
        assert link in README, f"README.md's table has no row linking {link}"
    assert set(sections) <= set(PAGES[page].__all__), "a section for a name that is not public"


RUN_PAGES = """
import re, sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")  # .example() outside a test warns
for page in sys.argv[1:]:
    text = Path(page).read_text()
    namespace = {"__name__": "__docs__"}
    for k, block in enumerate(re.findall(r"```python\\n(.*?)```", text, re.S)):
        exec(compile(block, f"{page}, example {k + 1}", "exec"), namespace)
    print("ran", page)
"""


def test_every_example_on_the_pages_runs() -> None:
    # devices.md last: its second example shows the error of asking for another count.
    pages = [str(ROOT / "docs" / f"{p}.md") for p in ("strategies", "assertions", "devices")]
    pages.insert(2, str(ROOT / "docs" / "contracts.md"))  # before devices.md (see above)
    done = subprocess.run(
        [sys.executable, "-c", RUN_PAGES, *pages],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("ran ") == len(pages), done.stdout


@pytest.mark.parametrize("page", ["README.md", "docs/contracts.md"])
def test_every_exit_status_is_in_the_pages_exit_table(page: str) -> None:
    """The exit statuses a run can end with (RunVerdict and usage errors), each a row of the page's
    table: a reader gating CI on them finds every one, with the same meaning everywhere."""
    from conformance._src.verdict import RunVerdict

    text = (ROOT / page).read_text()
    header = re.search(r"^\| (exit|status) \| verdict \|", text, re.M)
    assert header is not None, page
    table = text[header.start() : text.index("\n\n", header.start())]
    rows = set(re.findall(r"^\| \**(\d)\** \|", table, re.M))
    statuses = {str(v.exit_status) for v in RunVerdict} | {"4"}
    assert rows == statuses, (page, rows)
