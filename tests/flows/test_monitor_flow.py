"""The ``monitor`` flow on a Prefect test server: its artifacts, its alert events, and the
documented webhook notification delivered to a local HTTP receiver on 127.0.0.1."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator

import httpx
import numpy as np
import pytest

pytestmark = pytest.mark.flow

ALERT_EVENT = "alsa-bench.monitor.alert"


def make(n: int, seed: int, signal: float = 2.0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return rng.normal(size=(n, 3)) + signal * np.eye(3)[y], y


@pytest.fixture
def stream(prefect_server, state_home, tmp_path):
    (tmp_path / "prod").mkdir()
    z, y = make(400, 0)
    np.savez(tmp_path / "ref.npz", logits=z, labels=y)
    for day, signal in ((1, 2.0), (2, 0.5)):
        z, _ = make(150, day, signal)
        np.savez(tmp_path / "prod" / f"day-{day}.npz", logits=z)
    return tmp_path


def _api(path: str, body: dict) -> object:
    from prefect.settings import PREFECT_API_URL

    response = httpx.post(f"{PREFECT_API_URL.value()}{path}", json=body, timeout=30)
    response.raise_for_status()
    return response.json()


def _wait(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    pytest.fail(f"{what}: nothing after {timeout:.0f} s")


class _Receiver(http.server.BaseHTTPRequestHandler):
    received: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict]]]:
    """A webhook receiver on 127.0.0.1 (a free port) that records the JSON it is posted."""
    handler = type("Handler", (_Receiver,), {"received": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler.received
    finally:
        server.shutdown()
        server.server_close()


def test_flow_publishes_artifacts_and_emits_one_event_per_alert(stream):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.monitor import monitor
    from tasks.monitor.keys import stream_slug

    summary = monitor(reference=str(stream / "ref.npz"), production=str(stream / "prod"),
                      methods=["ac"], alert_below=0.9)
    assert summary["new_chunks"] == ["day-1.npz", "day-2.npz"] and "history" not in summary
    alerts = summary["alerts"]
    assert alerts and {a["direction"] for a in alerts} == {"down"}
    key = f"monitor-{stream_slug(summary['stream'])}"

    with get_client(sync_client=True) as client:
        found = {a.key for a in client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(like_=key)))}
    assert {key, f"{key}-figure", f"{key}-alerts"} <= found

    def events():
        body = {"filter": {"event": {"name": [ALERT_EVENT]},
                           "occurred": {"since": "2000-01-01T00:00:00Z"}}, "limit": 50}
        got = _api("/events/filter", body)["events"]
        mine = [e for e in got if e["payload"].get("stream") == summary["stream"]]
        return mine if len(mine) >= len(alerts) else None

    emitted = _wait(events, 60, "alert events on the server")
    event = emitted[0]
    assert event["resource"]["prefect.resource.id"] == f"alsa-bench.monitor.{key[8:]}"
    assert event["resource"]["alsa-bench.direction"] == "down"
    assert event["payload"]["kind"] == "below" and "accuracy alert (down)" in \
        event["payload"]["message"]


def test_the_documented_webhook_notification_reaches_a_local_receiver(stream, receiver):
    from flows.monitor import monitor, notify_alerts_by_webhook

    url, received = receiver
    automation_id = notify_alerts_by_webhook(url)
    assert automation_id
    summary = monitor(reference=str(stream / "ref.npz"), production=str(stream / "prod"),
                      methods=["ac"], alert_drop=5)
    [alert] = [a for a in summary["alerts"] if a["chunk_name"] == "day-2.npz"]

    def delivered():
        return [r for r in received if "day-2.npz" in r.get("body", "")]

    [post] = _wait(delivered, 90, f"a webhook POST to {url}")[:1]
    assert post["body"] == alert["message"]
    assert post["subject"] == "alsa-bench monitor alert (down)"
    assert post["text"] == f"{post['subject']}: {post['body']}"


def test_the_command_runs_the_flow_when_a_prefect_api_is_configured(stream, monkeypatch):
    from prefect.settings import PREFECT_API_URL
    from typer.testing import CliRunner

    from flows.cli import app

    monkeypatch.setenv("PREFECT_API_URL", PREFECT_API_URL.value())
    result = CliRunner().invoke(app, ["monitor", "--reference", str(stream / "ref.npz"),
                                      "--production", str(stream / "prod"), "-m", "ac",
                                      "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["new_chunks"] == ["day-1.npz", "day-2.npz"]
    assert not data["run_id"].startswith("cli-")  # a Prefect flow run's id
    assert len(data["history"]) == 2
