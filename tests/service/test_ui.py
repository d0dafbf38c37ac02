"""What a user sees in the Prefect UI, checked in a real headless Chromium (`make test-ui`), not through the API.

On a real server with the project deployed (`larev service setup`, `prefect deploy --all`) and a process worker:
the deployments list; the larev-pipeline deployment's parameter form, every section with its description and
default; a small pipeline started from that form (its JSON input) that completes, with run logs in the Logs tab and
the rounded score table as the first artifact; the same run started again with every step cached; a run given a
rationale file that does not exist, failed with the one clear message; `larev score` from the command line on the
finished run (a bad file refused with one line, a good one listed among the runs with its score table); after two
more scorings, the run's leaderboard artifact ranking the variants and both files. A screenshot of each page goes
to bench/ui/ (docs/service.md and docs/compare.md show them).
"""

from __future__ import annotations

import json
import re
import shutil
import time

import polars as pl
import pytest

from tests.service.conftest import REPO
from tests.test_flows import tiny_params

pytestmark = pytest.mark.ui

SHOTS = REPO / "bench" / "ui"
# The flags Debian's chromium needs on this kind of machine: no sandbox as root, and no background networking
# (its connections to Google's hosts are refused by the closed network, many at a time).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-sync",
                 "--disable-background-networking", "--disable-component-update"]


def chromium_path() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.fail("Debian's chromium is not installed: `make test-ui` installs it (apt-get install chromium)")
    return path


@pytest.fixture(scope="module")
def page():
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        tab = browser.new_page(viewport={"width": 1400, "height": 1000})
        tab.set_default_timeout(30_000)
        yield tab
        browser.close()


@pytest.fixture(scope="module")
def ui(live_service, worker):
    """The UI's address, with a worker of the larev-cpu pool running the deployments' flow runs."""
    return live_service.api_url.removesuffix("/api")


def shot(page, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def settle(page, text: str, timeout: float = 30) -> None:
    """Wait until `text` shows on the page (the UI renders after its API calls return)."""
    page.get_by_text(text, exact=False).first.wait_for(state="visible", timeout=timeout * 1000)


def form_field(page, title: str):
    """The input of the form property titled `title` (the innermost property box holding that label)."""
    box = page.locator(f"xpath=//span[contains(@class, 'schema-form-property__label') and normalize-space()='{title}']"
                       f"/ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' p-label ')][1]")
    return box.locator(".p-label__body").first.locator("textarea, input, select").first


def open_custom_run(page, ui: str) -> None:
    """Deployments -> larev-pipeline -> Run -> Custom run: the parameter form."""
    page.goto(f"{ui}/deployments")
    page.get_by_role("link", name="larev-pipeline", exact=True).first.click()
    settle(page, "Entrypoint")
    page.get_by_role("button", name="Run", exact=True).click()
    page.get_by_text("Custom run").click()
    settle(page, "Parameters of a pipeline run")


def submit_json(page, params: dict) -> str:
    """Switch the open form to its JSON input, enter `params`, submit; the new flow run's page URL."""
    page.locator(".flow-run-create-form-v2__header button").click()
    page.get_by_text("Use JSON input").first.click()
    editor = page.locator(".p-code-input textarea").first
    editor.fill(json.dumps(params, indent=2))
    assert json.loads(editor.input_value()) == params
    page.get_by_role("button", name="Submit").click()
    view = page.locator(".toast-flow-run-create__button").last
    try:
        view.wait_for(state="visible", timeout=60_000)
    except Exception:
        shot(page, "submit-failed")
        raise
    view.dispatch_event("click")  # the toast slides in; a pointer click races its animation
    page.wait_for_url(re.compile(r".*/runs/flow-run/[0-9a-f-]+"))
    return page.url.split("?")[0]


def wait_for_state(page, url: str, states: tuple[str, ...], timeout: float) -> str:
    """Reload the flow run's page until its state badge shows one of `states`; returns the state shown."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page.goto(url)
        badge = page.locator(".state-badge").first
        badge.wait_for(state="visible")
        shown = badge.inner_text().strip()
        if shown in states:
            return shown
        time.sleep(3)
    raise AssertionError(f"{url}: state still {shown!r} after {timeout:.0f} s (wanted {states})")


def open_tab(page, name: str) -> None:
    page.locator("li.p-tab").filter(has_text=re.compile(f"^{name}$")).click()


def form_defaults() -> list[tuple[str, str]]:
    """(title, description) of every top-level parameter of the pipeline form, as Prefect renders them."""
    from flows.pipeline import PipelineParams

    schema = PipelineParams.model_json_schema()
    shown = []
    for name, spec in schema["properties"].items():
        description = spec.get("description")
        if description is None and "$ref" in spec:
            description = schema["$defs"][spec["$ref"].rsplit("/", 1)[-1]].get("description")
        shown.append((spec.get("title") or name.replace("_", " ").title(), description))
    return shown


def test_the_deployments_page_lists_every_deployment(page, ui, deployed):
    page.goto(f"{ui}/deployments")
    settle(page, "larev-pipeline")
    names = [d["name"] for d in deployed["spec"]["deployments"]]
    assert len(names) >= 6
    for name in names:  # a link named exactly so: 'larev-step-gpu' alone would also match 'larev-step-gpu-docker'
        assert page.get_by_role("link", name=name, exact=True).count() >= 1, name
    shot(page, "01-deployments")


def test_the_form_shows_every_section_with_its_description_and_default(page, ui):
    open_custom_run(page, ui)
    text = page.inner_text("body")
    for title, description in form_defaults():
        assert f"{title} (Optional)" in text, title
        assert description and description in text, f"{title}: description not shown in full: {description!r}"
    # defaults are filled in: the run's name, the store, the demo's sizes
    assert form_field(page, "Run Name (Optional)").input_value() == "demo"
    assert form_field(page, "Artifact Root (Optional)").input_value() == ".larev/store"
    assert form_field(page, "N Train (Optional)").input_value() == "1600"
    assert form_field(page, "Epochs (Optional)").input_value() == "3"
    shot(page, "02-parameter-form")


@pytest.fixture(scope="module")
def completed_run(page, ui, tmp_path_factory):
    """A tiny pipeline run started from the form: (flow run URL, params)."""
    root = tmp_path_factory.mktemp("ui-run")
    params = {"params": tiny_params(root, run_name="ui-demo").model_dump(mode="json")}
    open_custom_run(page, ui)
    url = submit_json(page, params)
    assert wait_for_state(page, url, ("Completed", "Failed", "Crashed"), timeout=600) == "Completed"
    return url, params


def test_a_run_from_the_form_completes_with_logs(page, completed_run):
    url, _ = completed_run
    page.goto(url)
    settle(page, "Completed")
    open_tab(page, "Logs")
    settle(page, "phi_base epoch 1")  # the run's own log lines, not "This run didn't generate logs"
    assert "didn't generate logs" not in page.inner_text("body")
    shot(page, "03-run-completed-logs")
    open_tab(page, "Task Runs")
    settle(page, "train-phi_base")
    text = page.inner_text("body")
    assert "score-rev" in text and "publish-ui-demo" in text
    assert not re.search(r"publish-\d+", text), "task names are numbered instead of named"
    shot(page, "04-task-runs")


def test_the_score_table_is_the_first_artifact_and_reads_well(page, completed_run):
    url, _ = completed_run
    page.goto(url)
    open_tab(page, "Artifacts")
    settle(page, "ui-demo-scores")
    text = page.inner_text("body")
    tab = text.split("Flow run\n", 1)[1]  # the tab: the flow run's own artifacts, then the task runs'
    assert tab.index("ui-demo-scores") < tab.index("Task runs") < tab.index("ui-demo-report")
    shot(page, "05-artifacts")
    page.locator(".artifact-card").filter(has_text="ui-demo-scores").first.click()
    page.wait_for_url(re.compile(r".*/artifacts/artifact/[0-9a-f-]+"))
    settle(page, "gold_leaky")
    table = page.inner_text("body")
    assert not re.search(r"\d\.\d{7,}", table), "raw 16-digit floats in the score table"
    assert "gold_leaky" in table and "larev" in table
    shot(page, "06-score-table")


# Every table on the page: whether its right edge is inside the window, or it sits in a box the user can scroll
# sideways (a table cut off with no scroll bar loses its last columns).
TABLES_FIT = """() => Array.from(document.querySelectorAll('table')).map(table => {
  let box = table.parentElement, scrolls = false;
  while (box && !scrolls) {
    const overflow = getComputedStyle(box).overflowX;
    scrolls = (overflow === 'auto' || overflow === 'scroll') && box.scrollWidth > box.clientWidth;
    box = box.parentElement;
  }
  const right = table.getBoundingClientRect().right;
  return {header: table.querySelector('th') ? table.querySelector('th').innerText : '', right: right,
          window: document.documentElement.clientWidth, fits: right <= document.documentElement.clientWidth || scrolls};
})"""


def test_the_report_tables_fit_or_scroll(page, completed_run):
    url, _ = completed_run
    page.goto(url)
    open_tab(page, "Artifacts")
    settle(page, "ui-demo-report")
    page.locator(".artifact-card").filter(has_text="ui-demo-report").first.click()
    page.wait_for_url(re.compile(r".*/artifacts/artifact/[0-9a-f-]+"))
    settle(page, "gold_leaky")
    tables = page.evaluate(TABLES_FIT)
    shot(page, "06b-report")
    assert len(tables) >= 3
    assert all(t["fits"] for t in tables), [t for t in tables if not t["fits"]]


def test_the_same_run_again_is_served_from_the_cache(page, ui, completed_run):
    _, params = completed_run
    open_custom_run(page, ui)
    url = submit_json(page, params)
    assert wait_for_state(page, url, ("Completed", "Failed", "Crashed"), timeout=300) == "Completed"
    open_tab(page, "Task Runs")
    settle(page, "train-phi_base")
    text = page.inner_text("body")
    assert text.count("Cached") >= 10, text[:3000]
    shot(page, "07-cached-rerun")


def test_a_missing_rationale_file_fails_with_one_clear_message(page, ui, completed_run, tmp_path):
    _, params = completed_run
    missing = tmp_path / "no-such-rationales.jsonl"
    bad = json.loads(json.dumps(params))
    bad["params"]["run_name"] = "ui-bad-file"
    bad["params"]["rationales"] = str(missing)
    open_custom_run(page, ui)
    url = submit_json(page, bad)
    assert wait_for_state(page, url, ("Completed", "Failed", "Crashed"), timeout=300) == "Failed"
    open_tab(page, "Logs")
    settle(page, f"{missing}: file not found")
    logs = page.inner_text("body").split("Beginning flow run", 1)[1]
    assert "examples" not in logs, "a step ran before the input was checked"
    # the first error is larev's one line; Prefect's engine then logs its own traceback of every failed run in a
    # worker (flow_engine.run_flow), which names no larev code
    assert logs.index(f"{missing}: file not found") < logs.index("Traceback")
    assert logs.count("Traceback") == 1 and "flows/pipeline.py" not in logs and "larev/" not in logs
    open_tab(page, "Details")
    settle(page, "State Message")
    details = page.inner_text("body")  # the state message itself, shortened by the UI ('... See More')
    assert str(missing)[:40] in details.split("State Message", 1)[1][:200]
    open_tab(page, "Logs")
    settle(page, f"{missing}: file not found")
    page.get_by_text(f"{missing}: file not found").first.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "08-failed-run.png"))  # the viewport, scrolled to the error line


def test_a_score_from_the_command_line_shows_up_in_the_ui(page, ui, completed_run, live_service, tmp_path):
    """`larev score` on the finished run: a bad file stops with the one message (no traceback, no flow run); a good
    file's run is listed on the UI's runs page with its score table."""
    from tests.service.conftest import BIN

    _, params = completed_run
    run_dir = f"{params['params']['run_dir']}/ui-demo"
    ids = [json.loads(line)["id"] for line in open(f"{run_dir}/test_split.jsonl", encoding="utf-8")][:3]
    bad, good = tmp_path / "bad.csv", tmp_path / "mine.csv"
    bad.write_text(f"id,source,rationale\n{ids[0]},mine,one\n{ids[0]},mine,two\n", encoding="utf-8")
    good.write_text("id,source,rationale\n" + "".join(f"{i},mine,Because it says so.\n" for i in ids), encoding="utf-8")
    larev = (str(BIN / "larev"), "score", "--run", run_dir, "--server", live_service.api_url, "--no-progress")

    refused = live_service.run(*larev, "--rationales", str(bad), "--name", "cli-bad", check=False)
    assert refused.returncode == 2, refused.stderr
    assert f"{bad}: row 1, column 'id': duplicate id=" in refused.stderr
    assert "Traceback" not in refused.stdout + refused.stderr

    live_service.run(*larev, "--rationales", str(good), "--name", "cli-mine")
    page.goto(f"{ui}/runs")
    settle(page, "score-cli-mine", timeout=60)
    assert "score-cli-bad" not in page.inner_text("body")  # refused before any flow run was created
    shot(page, "09-cli-score-in-runs")
    page.get_by_text("score-cli-mine").first.click()
    page.wait_for_url(re.compile(r".*/runs/flow-run/[0-9a-f-]+"))
    settle(page, "Completed")
    open_tab(page, "Artifacts")
    settle(page, "cli-mine-scores")
    shot(page, "10-cli-score-artifacts")


def test_the_leaderboard_artifact_lists_every_scored_source(page, ui, completed_run, live_service, tmp_path):
    """Two more `larev score` runs on the finished run: the run's leaderboard artifact ranks the reference variants
    and both files, and says where the latest one landed."""
    from tests.service.conftest import BIN

    _, params = completed_run
    run_dir = f"{params['params']['run_dir']}/ui-demo"
    test = [json.loads(line) for line in open(f"{run_dir}/test_split.jsonl", encoding="utf-8")]
    first, second = tmp_path / "model-a.csv", tmp_path / "model-b.csv"
    ids = [r["id"] for r in test]
    # through polars: the gold rationales hold commas and quotes
    pl.DataFrame({"id": ids, "source": "a", "rationale": [r["rationale"] for r in test]}).write_csv(first)
    pl.DataFrame({"id": ids, "source": "b", "rationale": "Because it says so."}).write_csv(second)
    larev = (str(BIN / "larev"), "score", "--run", run_dir, "--server", live_service.api_url, "--no-progress")
    live_service.run(*larev, "--rationales", str(first), "--name", "model-a")
    scored = live_service.run(*larev, "--rationales", str(second), "--name", "model-b")
    assert "leaderboard: larev: model-b enters rank" in scored.stdout
    page.goto(f"{ui}/artifacts")
    settle(page, "ui-demo-leaderboard-moves", timeout=60)  # the board and, beside it, where the latest landed
    # the board's key page (its card's title is a prefix of the moves artifact's, so open it by key): a timeline of
    # its versions, one per scoring, the latest first; that one's page shows the table
    page.goto(f"{ui}/artifacts/key/ui-demo-leaderboard")
    settle(page, "Created ui-demo-leaderboard", timeout=60)
    shot(page, "11a-leaderboard-versions")
    page.locator("a[href*='/artifacts/artifact/']").first.click()
    page.wait_for_url(re.compile(r".*/artifacts/artifact/[0-9a-f-]+"))
    settle(page, "reference", timeout=60)  # the table's rows (the description above already names model-b)
    shot(page, "11-leaderboard")
    text = page.inner_text("body")
    assert "model-a" in text and "gold" in text and "reference" in text
