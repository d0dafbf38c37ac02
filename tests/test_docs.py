"""The docs cite what exists: every `make TARGET` they show is a target of the Makefile, and every link to a local
file reaches one. Read from README.md, CONTRIBUTING.md and docs/*.md as text (nothing run).

A `make` counts where it is a command: in a code block or an inline code span, first on a line or after `&&`,
`||`, `;`, `|` or `(`, with the targets that follow it (up to a comment, an operator, an option or a `VAR=value`).
"make the" in prose is English, not a command. Links are `[text](target)` and `![alt](target)` outside code; a
target with a scheme (https:, mailto:) or only an anchor (#...) is not a local file; an anchor after a file is
not checked, only the file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: The Markdown files whose citations must hold.
DOCS: tuple[Path, ...] = (REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md")))

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^\n]*\n(.*?)^ {0,3}\1[`~]*[ \t]*$", re.M | re.S)
_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_TARGET = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_OPERATORS = {"&&", "||", ";", "|", "("}
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def code_lines(markdown: str) -> tuple[list[str], str]:
    """The code of a Markdown text as command lines (each line of a fenced block, then each inline span, its line
    breaks read as spaces), and the text with the code taken out."""
    blocks = [line for m in _FENCE.finditer(markdown) for line in m.group(2).splitlines()]
    prose = _FENCE.sub("\n", markdown)
    spans = [" ".join(m.group(2).split()) for m in _SPAN.finditer(prose)]
    return [*blocks, *spans], _SPAN.sub(" ", prose)


def make_targets(line: str) -> list[str]:
    """The targets of every `make` command in one line of code."""
    words = re.sub(r"(&&|\|\||;|\||\()", r" \1 ", line).split()
    if words[:1] == ["$"]:  # a shell prompt
        words = words[1:]
    found = []
    for i, word in enumerate(words):
        if word != "make" or (i and words[i - 1] not in _OPERATORS):
            continue
        for arg in words[i + 1:]:
            if arg.startswith("-") and arg not in _OPERATORS:
                continue  # an option (-n, -j2)
            if "=" in arg:
                continue  # a variable (ESNLI=...)
            if not _TARGET.fullmatch(arg):
                break  # a comment, an operator, anything else
            found.append(arg)
    return found


def cited_make_targets(markdown: str) -> list[str]:
    """Every make target a Markdown text cites in its code, blocks first, in order, repeats kept."""
    return [target for line in code_lines(markdown)[0] for target in make_targets(line)]


def makefile_targets(makefile: str) -> set[str]:
    """The targets a Makefile defines (rules `name ...: ...`; not variables, not special targets like .PHONY)."""
    targets = set()
    for line in makefile.splitlines():
        if line.startswith(("\t", "#", " ")) or (m := re.match(r"([^:=#]+):(?![=:])", line)) is None:
            continue
        targets |= {name for name in m.group(1).split() if not name.startswith((".", "$"))}
    return targets


def local_links(markdown: str) -> list[str]:
    """The links to local files in a Markdown text, outside code: each target without its anchor."""
    prose = code_lines(markdown)[1]
    found = []
    for target in (m.group(1) for m in _LINK.finditer(prose)):
        if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor in the same file
        found.append(target.split("#", 1)[0])
    return found


def broken_links(path: Path, markdown: str) -> list[str]:
    """The local links of `markdown` (the text of the file at `path`) that name no file or folder."""
    return [link for link in local_links(markdown) if not (path.parent / link).exists()]


def _name(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_every_make_target_the_docs_cite_is_in_the_makefile(doc):
    defined = makefile_targets((REPO / "Makefile").read_text(encoding="utf-8"))
    missing = sorted(set(cited_make_targets(doc.read_text(encoding="utf-8"))) - defined)
    assert not missing, f"{_name(doc)} cites make targets the Makefile lacks: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=_name)
def test_every_local_link_in_the_docs_resolves(doc):
    broken = broken_links(doc, doc.read_text(encoding="utf-8"))
    assert not broken, f"{_name(doc)} links to files that do not exist: {broken}"


def test_the_docs_are_read_and_cite_targets():
    """The checks above see something: the docs are found, and their targets and links are read."""
    assert {_name(d) for d in DOCS} >= {"README.md", "CONTRIBUTING.md", "docs/results.md", "docs/architecture.md"}
    texts = [d.read_text(encoding="utf-8") for d in DOCS]
    assert {"demo", "test", "bench-quality", "bench-gpu-reference"} <= {t for x in texts for t in cited_make_targets(x)}
    assert len([link for x in texts for link in local_links(x)]) >= 10


PLANTED = """\
Run `make demo`, then make the tests pass; `make
bench-gpu-nowhere` waits. Make them all.

```bash
make test test-slow   # both, then
$ make -n bench-quality ESNLI=x.parquet && make install-minilm; larev run --make not-a-target
echo make
  make indented-target
```

See [the methods](docs/methods.md#larev), [nothing](docs/nowhere.md), ![a figure](docs/missing.png "title"),
[a site](https://example.org/x.md), [here](#anchor) and `[not a link](docs/in-code.md)`.

~~~
make tilde-target
~~~
"""


def test_the_checks_find_planted_faults():
    """A planted text: its commands' targets are found, prose is not, and its broken links are reported."""
    assert cited_make_targets(PLANTED) == ["test", "test-slow", "bench-quality", "install-minilm", "indented-target",
                                           "tilde-target", "demo", "bench-gpu-nowhere"]
    makefile = "PY ?= python\nX := 1\n.PHONY: demo test\n$(STAMP): a b\ndemo test: install\n\tmake x\ninstall:\n"
    defined = makefile_targets(makefile)
    assert defined == {"demo", "test", "install"}
    assert sorted(set(cited_make_targets(PLANTED)) - defined) == [
        "bench-gpu-nowhere", "bench-quality", "indented-target", "install-minilm", "test-slow", "tilde-target"]
    assert local_links(PLANTED) == ["docs/methods.md", "docs/nowhere.md", "docs/missing.png"]
    assert broken_links(REPO / "README.md", PLANTED) == ["docs/nowhere.md", "docs/missing.png"]


def test_no_doc_names_a_machines_folders():
    """The docs show paths a user has (the repository's, `../shared`, `data/`), never a temporary folder or a home
    directory of the machine a figure was measured on."""
    import re

    pages = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").rglob("*.md"))]
    found = [f"{page.relative_to(REPO)}: {m.group(0)}" for page in pages
             for m in re.finditer(r"(?<![\w.])/(tmp|root|home|work)/[^\s`)]*", page.read_text())]
    assert not found, found


def test_every_marked_figure_is_its_committed_results(tmp_path):
    """README.md, docs/results.md and docs/validity.md keep their figures between markers naming the result each
    comes from: each shows what its result gives (`larev show --write-figures` rewrites them), and a wrong figure
    planted in a copy is found."""
    from flows.cards import FIGURE_PAGES
    from larev.cards.figures import MARKED, stale_marked

    stale = {name: found for name in FIGURE_PAGES if (found := stale_marked((REPO / name).read_text(), REPO / "docs"))}
    assert not stale, f"figures that are not their results' (larev show --write-figures): {stale}"
    page = (REPO / "docs" / "results.md").read_text()
    marked = list(MARKED.finditer(page))
    assert marked, "docs/results.md marks the figures it quotes"
    first = marked[0]
    planted = page[:first.start(2)] + "0.999" + page[first.end(2):]
    assert [spec for spec, _, _ in stale_marked(planted, REPO / "docs")] == [first.group(1)]


def test_no_line_of_a_marked_page_begins_or_splits_a_figure_marker():
    """Markdown reads a line that begins with an HTML comment (`<!--`) as raw HTML: the paragraph ends there and the
    rest of the line shows unrendered. So a marked figure never begins a line (a word before it moves down with it),
    and no marker is split across two lines."""
    from flows.cards import FIGURE_PAGES
    from larev.cards.figures import MARKED

    found = [f"{name}:{n}" for name in FIGURE_PAGES
             for n, line in enumerate((REPO / name).read_text().splitlines(), 1) if line.lstrip().startswith("<!--")]
    found += [f"{name}: {m.group(1)}" for name in FIGURE_PAGES
              for m in MARKED.finditer((REPO / name).read_text()) if "\n" in m.group(0)]
    assert not found, f"lines that begin with a figure marker or split one: {found}"
