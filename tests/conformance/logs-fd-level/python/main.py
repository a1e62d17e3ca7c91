import os
import subprocess


def handler(event, context):
    subprocess.run(["echo", "child-process-marker"], check=True)
    os.write(2, b"fd2-marker\n")
    for i in range(100):
        os.write(1, b"fd1-line-%03d\n" % i)
    return "ok"
