#!/usr/bin/env python3
"""A flock worker in CPython, standard library only, run as `command:`.

flock-agent runs it once per task, in the agent's own directory, with the
task's payload on stdin; what it prints is the result, and a non-zero exit
fails the task. flock-agent does the bus's part (the credential, pulling
tasks, storing results, heartbeats), so this program needs no NATS client.

This one counts the words of the payload, keeps a copy of each result
under its own directory, and logs a JSON line to FLOCK_LOG_FILE.
"""
import datetime
import json
import os
import pathlib
import sys


def log(level, msg, **fields):
    line = json.dumps({"time": datetime.datetime.now(datetime.timezone.utc).isoformat(),
                       "level": level, "msg": msg, "agent": int(os.environ.get("AGENT_ID", "0")), **fields})
    path = os.environ.get("FLOCK_LOG_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
    print(line, file=sys.stderr)  # the task's stderr, kept with its result


def main():
    payload = sys.stdin.read()
    words = payload.split()
    result = {"words": len(words), "chars": len(payload), "first": words[0] if words else None}
    out = pathlib.Path("outputs")  # relative: the agent's own directory
    out.mkdir(exist_ok=True)
    name = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ") + ".json"
    (out / name).write_text(json.dumps(result) + "\n", encoding="utf-8")
    log("INFO", "task done", words=result["words"], kept=str(out / name))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
