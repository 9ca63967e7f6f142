"""JetStream's object store, read and written in bounded steps (DESIGN §4: files served from any
web replica live in the object store, not on one replica's disk).

nats-py's `ObjectStore.get` gathers an object in memory (or writes into a file) through an ordered
push consumer that a timeout around it would leave subscribed. Here an object is read one chunk at
a time by direct get, each a request bounded by the JetStream context's timeout, so a reader holds
one chunk in memory, can stream it onward as it goes, and leaves nothing behind when it stops. The
digest is checked once the last chunk is in.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import AsyncIterator
from typing import BinaryIO

from nats.js import JetStreamContext, api
from nats.js.errors import BucketNotFoundError, NotFoundError, ObjectNotFoundError
from nats.js.object_store import OBJ_CHUNKS_PRE_TEMPLATE, OBJ_DIGEST_TYPE, OBJ_STREAM_TEMPLATE, ObjectStore

__all__ = ["ObjectUnreadable", "chunks", "find", "open_bucket", "put_file"]


class ObjectUnreadable(RuntimeError):
    """A chunk went missing (the object was replaced mid-read) or the digest did not match."""


async def open_bucket(js: JetStreamContext, bucket: str, *, replicas: int = 1, description: str = "") -> ObjectStore:
    """The bucket, made if it is not there yet (idempotent: two makers with the same config agree)."""
    try:
        return await js.object_store(bucket)
    except BucketNotFoundError:
        return await js.create_object_store(bucket, api.ObjectStoreConfig(
            description=description or None, storage=api.StorageType.FILE, replicas=replicas))


async def find(js: JetStreamContext, bucket: str, name: str) -> tuple[ObjectStore, api.ObjectInfo] | None:
    """The object's description, or None when it (or the whole bucket) does not exist."""
    try:
        store = await js.object_store(bucket)
        return store, await store.get_info(name)
    except (BucketNotFoundError, ObjectNotFoundError):
        return None


async def chunks(js: JetStreamContext, bucket: str, info: api.ObjectInfo) -> AsyncIterator[bytes]:
    """The object's bytes, chunk by chunk. Raises ObjectUnreadable if a chunk is missing or the
    digest does not match what the object's description says."""
    if not info.size:
        return
    stream = OBJ_STREAM_TEMPLATE.format(bucket=bucket)
    subject = OBJ_CHUNKS_PRE_TEMPLATE.format(bucket=bucket, obj=info.nuid)
    digest = hashlib.sha256()
    seq, read = 1, 0
    for _ in range(info.chunks or 0):
        try:
            msg = await js.get_msg(stream, seq=seq, subject=subject, direct=True, next=True)
        except NotFoundError:
            raise ObjectUnreadable(f"{info.name}: chunk after #{seq} missing (replaced while read?)") from None
        data = msg.data or b""
        digest.update(data)
        read += len(data)
        seq = (msg.seq or seq) + 1
        yield data
    want = (info.digest or "").removeprefix(OBJ_DIGEST_TYPE).removeprefix(OBJ_DIGEST_TYPE.upper())
    if read != info.size or base64.urlsafe_b64encode(digest.digest()).decode() != want:
        raise ObjectUnreadable(f"{info.name}: {read} bytes read of {info.size}, or a digest mismatch")


async def put_file(store: ObjectStore, name: str, source: BinaryIO, *, description: str = "",
                   headers: dict[str, str] | None = None) -> api.ObjectInfo:
    """Store a file under `name`, read in chunks (never whole in memory); replaces any earlier
    object of that name once the new one is complete."""
    meta = api.ObjectMeta(name=name, description=description or None, headers=headers)
    return await store.put(name, source, meta=meta)  # type: ignore[arg-type]  # nats-py's put reads any binary file object
