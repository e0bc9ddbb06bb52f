"""The doctor's HTML report rendered by a real browser (Debian's chromium, headless, which
`scripts/setup --for-tests` installs): the verdict reads back as the report states it, and
is visible, not merely present in the markup."""

import html
import re
import shutil
import subprocess

import pytest

from dlbridge import doctor
from dlbridge.doctor import render_html

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(BROWSER is None,
                                reason="needs Debian's chromium (scripts/setup --for-tests installs it)")

# Added to a copy of the page only (the report itself has no scripts): after layout, copy what
# the browser renders of the verdict and of the first finding into the DOM it dumps.
READ_BACK = """<script>
window.addEventListener('load', function () {
  function put(id, text) { var pre = document.createElement('pre'); pre.id = id; pre.textContent = text;
                           document.body.appendChild(pre); }
  var verdict = document.getElementById('verdict');
  put('verdict-text', verdict.innerText);
  put('verdict-height', String(verdict.getBoundingClientRect().height));
  put('matrix-cells', String(document.querySelectorAll('table.matrix td').length));
});
</script>"""


def _render_in_browser(page: str, tmp_path) -> dict:
    path = tmp_path / "report.html"
    path.write_text(page.replace("</body>", READ_BACK + "</body>"), encoding="utf-8")
    out = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", path.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    found = dict(re.findall(r'<pre id="([\w-]+)">(.*?)</pre>', out.stdout, re.S))
    return {k: html.unescape(v) for k, v in found.items()}


@pytest.fixture(scope="module")
def report():
    return doctor.run(["numpy", "dlbridge"], number=2, repeat=1)


def test_the_browser_shows_the_verdict(report, tmp_path):
    shown = _render_in_browser(render_html.render(report), tmp_path)
    lines = [line.strip() for line in shown["verdict-text"].splitlines() if line.strip()]
    assert lines[:-1] == report["summary"]["verdict"]
    assert lines[-1].startswith(f"Exit status {report['summary']['exit_status']}: ")
    assert float(shown["verdict-height"]) > 0
    assert int(shown["matrix-cells"]) == len(report["pairs"])


def test_the_page_needs_nothing_from_the_network(report):
    page = render_html.render(report)
    for forbidden in ("<script", "<link", "http://", "https://", "src=", "@import"):
        assert forbidden not in page
