"""The other process of the inbox watch tests: it posts, or it watches until it is killed.

Run as ``python -m tests.storage.file.watch_child <folder> post <entry id>`` (one
post, then exit) or ``... watch`` (open a watch on the run, print ``ready``, then
wait for ever: the test SIGKILLs it).
"""

from __future__ import annotations

import sys

import anyio

from actorflow.storage import FileStore

RUN = "run-1"


async def main(argv: list[str]) -> None:
    folder, mode, *args = argv
    store = FileStore(folder)
    try:
        if mode == "post":
            await store.post(RUN, entry_id=args[0], type="Msg", payload=b"from afar")
            return
        async with store.watch_inbox(RUN):
            print("ready", flush=True)
            await anyio.sleep_forever()
    finally:
        await store.aclose()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
