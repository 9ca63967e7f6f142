"""The log snippet's rules (seed 003, "The log snippet"), as properties and examples: always at
most 1,200 characters of valid UTF-8; every secret shape redacted wherever it appears, a near
miss of each kept; frames and causes chosen as the seed says; never raises."""

from __future__ import annotations

import string
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from zimmer_common import snippet

HERE = str(Path(__file__).resolve().parent)
ALNUM = string.ascii_letters + string.digits


def chars(alphabet: str, n: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=alphabet, min_size=n, max_size=n + 20)


# Each shape the seed lists: a generator of real-looking secrets, and of near misses that must stay.
SECRETS = {
    "slack_bot": st.builds(lambda s: f"xoxb-{s}", chars(ALNUM + "-", 24)),
    "slack_app": st.builds(lambda s: f"xapp-1-{s}", chars(ALNUM + "-", 20)),
    "github": st.builds(lambda p, s: f"gh{p}_{s}", st.sampled_from("pousr"), chars(ALNUM, 36)),
    "github_pat": st.builds(lambda s: f"github_pat_{s}", chars(ALNUM + "_", 22)),
    "anthropic": st.builds(lambda s: f"sk-ant-api03-{s}", chars(ALNUM + "_-", 20)),
    "openai": st.builds(lambda s: f"sk-proj-{s}", chars(ALNUM + "_-", 20)),
    "google": st.builds(lambda s: f"AIza{s}", chars(ALNUM + "_-", 35).map(lambda t: t[:35])),
    "aws": st.builds(lambda p, s: f"{p}{s}", st.sampled_from(["AKIA", "ASIA"]),
                     chars(string.ascii_uppercase + string.digits, 16).map(lambda t: t[:16])),
    "jwt": st.builds(lambda a, b, c: f"eyJ{a}.eyJ{b}.{c}", chars(ALNUM + "_-", 8), chars(ALNUM + "_-", 8),
                     chars(ALNUM + "_-", 10)),
    "pem": st.builds(lambda k, body: f"-----BEGIN {k}PRIVATE KEY-----\n{body}\n-----END {k}PRIVATE KEY-----",
                     st.sampled_from(["", "RSA ", "EC ", "OPENSSH "]), chars(ALNUM + "+/=\n", 40)),
}
# The secret part of shapes whose name stays visible (the header name, the user, the key name).
SECRET_VALUE = chars(ALNUM, 12).map(lambda s: "Z9" + s)  # never producible by the filler
KEYED = {
    "authorization": st.builds(lambda s: ("Authorization: Bearer ", s), SECRET_VALUE),
    "url_password": st.builds(lambda u, s: (f"postgres://{u}:", s + "@db.example:5432/z"),
                              chars(string.ascii_lowercase, 3), SECRET_VALUE),
    "token_assignment": st.builds(lambda k, s: (f"{k}=", s), st.sampled_from(["token", "GITHUB_TOKEN", "secret",
                                                                                "client_secret", "api_key"]),
                                  SECRET_VALUE),
}
NEAR_MISSES = ["xoxb", "xoxb-short", "ghp_tooShort123", "sk-short", "AKIA123", "AIzaShort", "eyJonly.one",
               "BEGIN PRIVATE KEY", "Authorization header missing", "the token expired", "secret sauce",
               "https://example.com/path", "task-ant-colony", "skeleton-key"]
FILLER = st.text(alphabet=string.ascii_lowercase + " \n", max_size=300)


@settings(max_examples=300)
@given(st.one_of(st.text(), st.binary(), st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF),
                                                 min_size=1000, max_size=5000)))
@example("é" * 2000)
@example(b"\xe2\x82")  # stderr cut mid-character
@example("\ud800 lone surrogate \x00 NUL")
def test_always_bounded_valid_utf8_and_never_raises(source: str | bytes) -> None:
    out = snippet.build(source)
    assert len(out) <= snippet.MAX_CHARS
    out.encode("utf-8")  # raises on a lone surrogate
    assert "\x00" not in out


SEPARATOR = st.sampled_from([" ", "\n", "\t", "(", ")", "[", "]", "{", "}", '"', "'", "=", ":", ",", ";", "<", ">"])


@settings(max_examples=400)
@given(shape=st.sampled_from(sorted(SECRETS)), data=st.data(), before=FILLER, after=FILLER, left=SEPARATOR,
       right=SEPARATOR)
def test_every_secret_shape_is_redacted_wherever_it_appears(shape: str, data: st.DataObject, before: str,
                                                            after: str, left: str, right: str) -> None:
    secret = data.draw(SECRETS[shape])
    out = snippet.build(f"{before}{left}{secret}{right}{after}")
    assert secret not in out
    assert snippet.REDACTED in out or len(before) + len(after) > snippet.MAX_CHARS


@settings(max_examples=300)
@given(shape=st.sampled_from(sorted(KEYED)), data=st.data(), before=FILLER, after=FILLER)
def test_keyed_secrets_keep_their_name_and_lose_their_value(shape: str, data: st.DataObject, before: str,
                                                            after: str) -> None:
    name, value = data.draw(KEYED[shape])
    out = snippet.build(f"{before} {name}{value} {after}")
    secret = value.split("@")[0]
    assert secret not in out
    assert name.strip() in out or len(before) + len(after) > snippet.MAX_CHARS // 2


@settings(max_examples=200)
@given(miss=st.sampled_from(NEAR_MISSES), before=FILLER, after=FILLER)
def test_a_near_miss_of_each_shape_is_kept(miss: str, before: str, after: str) -> None:
    text = f"{before} {miss} {after}"
    out = snippet.build(text)
    assert snippet.REDACTED not in out
    if len(text) <= snippet.MAX_CHARS:
        assert out == text


def test_a_render_that_fails_says_so() -> None:
    class Hostile:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert snippet.build(Hostile()) == "(log snippet unavailable: RuntimeError)"


def test_an_overrun_keeps_head_and_tail_with_the_elided_count() -> None:
    text = "HEAD" + "x" * 5000 + "TAIL"
    out = snippet.build(text)
    assert len(out) == snippet.MAX_CHARS
    assert out.startswith("HEAD") and out.endswith("TAIL")
    elided = int(out.split("(… ")[1].split(" characters")[0])
    assert elided == len(text) - (len(out) - len(f"\n(… {elided} characters elided …)\n"))


def _deep(n: int) -> None:
    if n == 0:
        raise KeyError("innermost")
    _deep(n - 1)


def test_frames_worth_reading_and_the_cause_chain() -> None:
    def adapter() -> None:
        try:
            _deep(20)
        except KeyError as exc:
            raise ConnectionError("connection refused, password=hunter2") from exc

    def outer() -> None:
        try:
            adapter()
        except ConnectionError as exc:
            raise RuntimeError("adapter error") from exc

    try:
        outer()
    except RuntimeError as exc:
        out = snippet.build(exc, root=HERE, app=lambda f: f.startswith(HERE))
    assert out.startswith("RuntimeError: adapter error")
    assert "caused by:\nConnectionError: connection refused, password=[REDACTED]" in out
    assert "caused by:\nKeyError: 'innermost'" in out
    assert "hunter2" not in out
    key_error = out.split("KeyError: 'innermost'")[1]
    kept = [line for line in key_error.splitlines() if " in _deep" in line]
    assert len(kept) == snippet.APP_FRAME_LIMIT  # the innermost 8 app frames of 21 _deep calls
    assert "(… 13 frames elided …)" in key_error or "frames elided" in key_error
    assert all(not line.strip().startswith(HERE) for line in out.splitlines())  # the root is stripped
    assert "test_snippet.py:" in out


def test_the_cause_chain_stops_at_two() -> None:
    def chain(n: int) -> None:
        if n == 0:
            raise ValueError("root cause")
        try:
            chain(n - 1)
        except Exception as exc:
            raise RuntimeError(f"level {n}") from exc

    try:
        chain(5)
    except RuntimeError as exc:
        out = snippet.build(exc, root=HERE, app=lambda f: f.startswith(HERE))
    assert out.count("caused by:") == snippet.CAUSE_LIMIT
    assert "(… further causes elided …)" in out and "root cause" not in out


def test_library_top_frames_are_kept_beside_app_frames() -> None:
    import json

    try:
        json.loads("{broken")
    except ValueError as exc:
        out = snippet.build(exc, root=HERE, app=lambda f: f.startswith(HERE))
    lines = out.splitlines()
    assert "json/decoder.py" in lines[1] and "json/decoder.py" in lines[2]  # the top 2, where it raised
    assert any("test_snippet.py" in line for line in lines)


KEY_NAMES = ["Authorization", "authorization", "password", "api_key", "client_secret", "access_token", "GITHUB_TOKEN",
             "apiKey"]


@st.composite
def keyed_shapes(draw: st.DrawFn) -> tuple[str, str, str]:
    """A secret under its key in the shapes code prints: bare, quoted, dict or JSON, with `:` or
    `=`, a scheme word before the value or not. (text, key, secret)."""
    key = draw(st.sampled_from(KEY_NAMES))
    secret = draw(SECRET_VALUE)
    kq = draw(st.sampled_from(["", '"', "'"]))
    vq = draw(st.sampled_from(["", '"', "'"]))
    sep = draw(st.sampled_from([": ", "=", ":", " = "]))
    scheme = draw(st.sampled_from(["", "Bearer ", "bearer ", "Basic ", "token "]))
    pair = f"{kq}{key}{kq}{sep}{vq}{scheme}{secret}{vq}"
    shape = draw(st.sampled_from(["{pair}", "{{{pair}}}", "headers={{{pair}, 'x': 1}}", "[{pair}]", "{pair}, next"]))
    return shape.format(pair=pair), key, secret


@settings(max_examples=400)
@given(keyed_shapes(), FILLER, FILLER)
@example(('{"Authorization": "Bearer Z9abcdefghijkl"}', "Authorization", "Z9abcdefghijkl"), "", "")
@example(("headers={'authorization': 'Bearer Z9abcdefghijkl'}", "authorization", "Z9abcdefghijkl"), "", "")
@example(('{"password": "Z9hunter2hunter", "api_key": "Z9k123k123k1"}', "password", "Z9hunter2hunter"), "", "")
@example(("{'client_secret': 'Z9shhshhshhs'}", "client_secret", "Z9shhshhshhs"), "", "")
@example(("access_token: Bearer Z9eyJtoken123", "access_token", "Z9eyJtoken123"), "", "")
def test_quoted_keys_dict_shapes_and_a_scheme_word_are_redacted(shape: tuple[str, str, str], before: str,
                                                                 after: str) -> None:
    """Issue 26 #5: `{"Authorization": "Bearer …"}`, `headers={'authorization': 'Bearer …'}`,
    `{"password": …, "api_key": …}` and `{'client_secret': 'shh'}` leaked, and `access_token:
    Bearer eyJ…` hid the word "Bearer" and kept the token. The key stays, the value goes."""
    text, key, secret = shape
    out = snippet.build(f"{before} {text} {after}")
    assert secret not in out
    assert "Z9" not in out or len(before) + len(after) > snippet.MAX_CHARS // 2  # no other value of the shape left
    assert key in out or len(before) + len(after) > snippet.MAX_CHARS // 2


def test_app_frames_are_found_by_package_in_an_installed_wheel(tmp_path: Path) -> None:
    """Issue 26 #6: in the shipped image every Zimmer frame sits under site-packages, and the
    snippet root computed from the file's location was `…/lib`: no app frame was kept. Build the
    wheel, install it, raise through Zimmer code into a library there, and read the snippet."""
    import subprocess
    import sys
    import sysconfig
    import venv

    repo = Path(__file__).resolve().parents[2]
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w",
                    str(wheels), str(repo)], check=True, timeout=300)
    [wheel] = wheels.glob("zimmer-*.whl")
    target = tmp_path / "venv"
    venv.create(target, with_pip=False)
    site = next(target.glob("lib/python*/site-packages"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site), str(wheel)],
                   check=True, timeout=300)
    code = (
        "from zimmer_common import snippet\n"
        "from zimmer_common.schedule import next_fire_times\n"
        "from datetime import datetime, timezone\n"
        "try:\n"
        "    next_fire_times('61 * * * * *', datetime.now(timezone.utc))\n"
        "except Exception as exc:\n"
        "    import zimmer_common\n"
        "    print(zimmer_common.__file__)\n"
        "    print(snippet.build(exc))\n")
    # The project's dependencies from this environment; Zimmer itself only from the installed wheel.
    env = {"PYTHONPATH": sysconfig.get_paths()["purelib"], "PATH": "/usr/bin:/bin"}
    run = subprocess.run([str(target / "bin" / "python"), "-c", code], capture_output=True, text=True, env=env,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    where, *lines = run.stdout.splitlines()
    assert where.startswith(str(site)), where  # the installed copy, not the checkout
    frames = [line.strip() for line in lines if line.startswith("  ")]
    assert any(f.startswith("zimmer_common/schedule.py:") and f.endswith("in next_fire_times") for f in frames), lines
    assert not any("site-packages/zimmer_" in f for f in frames)  # shown from the package on
