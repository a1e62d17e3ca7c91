"""A small notes API for sless (Python 3.11, standard library only).

Routes (the event's "path" is what follows the function's URL):

    POST   /notes        {"text": "..."}  -> 201 {"id", "text", "created_at"}
    GET    /notes                         -> 200 {"items": [...]}
    GET    /notes/{id}                    -> 200 note, or 404
    DELETE /notes/{id}                    -> 204, or 404

Notes are kept in a JSON file: $NOTES_FILE, or notes.json in the instance's
temp folder ($TMPDIR). The code root is read-only, and each instance has its
own temp folder, so point NOTES_FILE at a shared writable path if several
instances must see the same notes.
"""
import base64
import binascii
import fcntl
import json
import os
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone


def _notes_file():
    return os.environ.get("NOTES_FILE") or os.path.join(tempfile.gettempdir(), "notes.json")


# ---------------------------------------------------------------- storage


@contextmanager
def _locked():
    """Serialises read-modify-write cycles between instances sharing the file."""
    path = _notes_file()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _load():
    try:
        with open(_notes_file(), encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        data = {}
    return {"next_id": data.get("next_id", 1), "notes": data.get("notes", [])}


def _save(data):
    """Writes the whole store to a temp file beside it, then renames it into place."""
    path = os.path.abspath(_notes_file())
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".notes-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


# ---------------------------------------------------------------- HTTP helpers


def _json(status, payload, headers=None):
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
    }


def _error(status, message, headers=None):
    return _json(status, {"error": message}, headers)


def _parse_id(text):
    return int(text) if text.isascii() and text.isdigit() else None


def _find(notes, note_id):
    return next((n for n in notes if n["id"] == note_id), None)


# ---------------------------------------------------------------- routes


def _create(event):
    body = event.get("body")
    if body is None or body == "":
        return _error(400, "body must be a JSON object like {\"text\": \"...\"}")
    try:
        if event.get("isBase64Encoded"):
            body = base64.b64decode(body, validate=True).decode("utf-8")
        data = json.loads(body)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return _error(400, "body must be valid JSON")
    if not isinstance(data, dict):
        return _error(400, "body must be a JSON object like {\"text\": \"...\"}")
    text = data.get("text")
    if not isinstance(text, str) or not text.strip():
        return _error(400, "\"text\" must be a non-empty string")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # e.g. a lone surrogate such as "\ud800"
        return _error(400, "\"text\" must be valid Unicode")

    with _locked():
        store = _load()
        note = {
            "id": store["next_id"],
            "text": text,
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
        }
        store["next_id"] += 1
        store["notes"].append(note)
        _save(store)
    return _json(201, note, {"Location": f"/notes/{note['id']}"})


def _list():
    return _json(200, {"items": _load()["notes"]})


def _get(note_id):
    note = _find(_load()["notes"], note_id)
    return _json(200, note) if note else _error(404, "note not found")


def _delete(note_id):
    with _locked():
        store = _load()
        note = _find(store["notes"], note_id)
        if not note:
            return _error(404, "note not found")
        store["notes"].remove(note)
        _save(store)
    return {"statusCode": 204, "headers": {}, "body": ""}


def handler(event, context):
    method = (event.get("httpMethod") or "GET").upper()
    parts = [p for p in (event.get("path") or "/").split("/") if p]

    if parts == ["notes"]:
        if method == "GET":
            return _list()
        if method == "POST":
            return _create(event)
        return _error(405, "method not allowed", {"Allow": "GET, POST"})

    if len(parts) == 2 and parts[0] == "notes":
        note_id = _parse_id(parts[1])
        if method not in ("GET", "DELETE"):
            return _error(405, "method not allowed", {"Allow": "GET, DELETE"})
        if note_id is None:
            return _error(404, "note not found")
        return _get(note_id) if method == "GET" else _delete(note_id)

    return _error(404, "not found")
