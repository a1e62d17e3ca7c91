import os
import tempfile


def handler(event, context):
    path = os.path.join(tempfile.gettempdir(), "scratch.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("scratch ✓")
    with open(path, encoding="utf-8") as f:
        read_back = f.read()
    os.remove(path)
    return {"readBack": read_back, "homeIsTmp": os.environ.get("HOME") == os.environ.get("TMPDIR")}
