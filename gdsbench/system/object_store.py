"""What gdsbench writes to and lists in S3: a pattern object (`gdsbench
prepare s3://BUCKET/KEY`), a dataset's objects under a prefix, and the listing
`train` reads a prefix by. Through boto3, the AWS SDK for Python, with the
environment the curl engine reads: the AWS credentials, the endpoint
(AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL; addressed path-style) and
AWS_CA_BUNDLE. Reads that are measured never come here: they are the native
curl engine's.

gdsbench writes only objects it created. Each carries its mark in its
metadata (x-amz-meta-gdsbench-prepared: the size and seed it was written
with), looked for before an object is replaced: an object without it is never
overwritten or deleted, and every write carries a condition (If-None-Match
for a new object, If-Match for one of gdsbench's), so a server that keeps
them writes nothing over an object that appeared since. Objects over
MULTIPART are uploaded in parts, and an upload that fails or is interrupted
is aborted, so no half-written object ever has the name; an upload whose
process was killed (nothing of it ran after) is aborted by the next prepare of
that key, found by the note gdsbench keeps of each upload it starts (only
those: another's upload of the same key is never touched).

Every request has the timeouts and retries of the command (--timeout,
--retries; WRITING where it has none), and every failure of boto3 or
botocore is one line naming the object. The credentials are boto3's
(botocore's chain: the environment, ~/.aws/credentials, a profile, an
instance role), and share_credentials hands them to the native curl engine,
so that a run reads with what prepare wrote with.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from glob import glob

import numpy as np

from gdsbench import _native
from gdsbench.job.errors import UsageError
from gdsbench.job.units import format_size

MARK = "gdsbench-prepared"  # the metadata key (S3 sends it as x-amz-meta-gdsbench-prepared)
MULTIPART = 64 * 1024 * 1024  # objects larger than this are uploaded in parts of this size
BLOCK = _native.PATTERN_BLOCK
SECOND = 1_000_000_000
# How a command without --timeout and --retries asks S3 (prepare's default): a busy server's 503 is tried again
WRITING = {"timeout_ns": 30 * SECOND, "retries": 3}
CONNECT_AT_MOST_S = 10  # the connection's own share of --timeout, as the curl engine's


def split(url: str, flag: str = "PATH") -> tuple[str, str]:
    """s3://BUCKET/KEY -> (BUCKET, KEY); the key may be empty (a bucket's top) or end in / (a prefix)."""
    bucket, _, key = url[len("s3://"):].partition("/")
    if not bucket:
        raise UsageError(f"{flag} {url}: an S3 name is s3://BUCKET/KEY")
    return bucket, key


def endpoint() -> str | None:
    """The S3 endpoint the environment names (--s3-endpoint sets the first), None for AWS itself."""
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def region() -> str:
    """The region requests are signed for, as the AWS tools read it (us-east-1 where none is set)."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


CREDENTIALS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")  # what the curl engine reads


def share_credentials() -> None:
    """The credentials boto3 finds outside the environment (botocore's chain: ~/.aws/credentials,
    AWS_PROFILE's profile, SSO, a container or instance role) put into this process's environment,
    where the native curl engine and the processes a run starts read them: a run reads with what
    prepare wrote with. Credentials the environment names are its own, kept as they are."""
    if any(os.environ.get(name) for name in CREDENTIALS[:2]):
        return
    try:
        import botocore.session
        from botocore.exceptions import BotoCoreError
    except ImportError:
        return  # the curl engine then says which variables to set
    try:
        found = botocore.session.Session().get_credentials()
        frozen = found.get_frozen_credentials() if found is not None else None
    except BotoCoreError as e:
        raise UsageError(f"AWS credentials: {one_line(e)}; fix the profile, or set AWS_ACCESS_KEY_ID and "
                         "AWS_SECRET_ACCESS_KEY") from None
    if frozen is None or not frozen.access_key or not frozen.secret_key:
        return
    for name, value in zip(CREDENTIALS, (frozen.access_key, frozen.secret_key, frozen.token)):
        if value:
            os.environ[name] = value


def client(asking: dict | None = None):
    """A boto3 S3 client for the environment's credentials and endpoint, asking as `asking` says
    (remote_object.asking_of: timeout_ns, retries; WRITING where None): each wait for the server
    at most --timeout, each request tried --retries more times after a timeout, a dropped
    connection, a 5xx or a throttle (botocore's standard retries)."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise UsageError("writing or listing s3:// needs boto3, the AWS SDK for Python: pip install 'gdsbench[s3]'") \
            from None
    asking = {**WRITING, **(asking or {})}
    timeout_s = asking["timeout_ns"] / SECOND or None  # 0: no limit
    url = endpoint()
    config = Config(s3={"addressing_style": "path"} if url else {}, connect_timeout=min(timeout_s or CONNECT_AT_MOST_S,
                    CONNECT_AT_MOST_S), read_timeout=timeout_s,
                    retries={"total_max_attempts": asking["retries"] + 1, "mode": "standard"})
    session = boto3.session.Session()  # its own: boto3's default session keeps the credentials it first found
    return session.client("s3", region_name=region(), endpoint_url=url, verify=os.environ.get("AWS_CA_BUNDLE") or None,
                          config=config)


def one_line(error: Exception, at_most: int = 300) -> str:
    """An exception's text on one line, clipped."""
    text = " ".join(str(error).split())
    return text if len(text) <= at_most else text[:at_most] + "..."


def _tries(s3) -> str:
    """What a client's --timeout and --retries are, as the user wrote them: '--timeout 2 s, 2 tries'."""
    config = s3.meta.config
    tries = (config.retries or {}).get("total_max_attempts", 1)
    limit = "no --timeout" if config.read_timeout is None else f"--timeout {config.read_timeout:g} s"
    return f"{limit}, {tries} {'try' if tries == 1 else 'tries'}"


def failure(url: str, error: Exception, s3=None) -> UsageError:
    """A boto3 failure as one line naming the object and the fix (s3: the client that failed, whose
    --timeout and --retries are named)."""
    from botocore.exceptions import (
        ClientError,
        ConnectTimeoutError,
        EndpointConnectionError,
        NoCredentialsError,
        ReadTimeoutError,
    )

    server = endpoint() or "of AWS"
    if isinstance(error, NoCredentialsError):
        return UsageError(f"PATH {url}: no S3 credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a "
                          "profile in ~/.aws/credentials (AWS_PROFILE)")
    if isinstance(error, (ReadTimeoutError, ConnectTimeoutError)):
        asked = f" ({_tries(s3)})" if s3 is not None else ""
        return UsageError(f"PATH {url}: no answer from the S3 endpoint {server} within the time asked{asked}; raise "
                          "--timeout, or find what stops the server")
    if isinstance(error, EndpointConnectionError):
        return UsageError(f"PATH {url}: cannot connect to the S3 endpoint {server}; check --s3-endpoint or "
                          "AWS_ENDPOINT_URL")
    if isinstance(error, ClientError):
        return UsageError(f"PATH {url}: {_refusal(error.response or {})}")
    return UsageError(f"PATH {url}: {one_line(error)}")


def _refusal(response: dict) -> str:
    """An S3 error answer in words: 'HTTP 403 SignatureDoesNotMatch: ...' (its code once: a HEAD's
    answer has no body, and botocore then gives the status as its code)."""
    code = str(response.get("Error", {}).get("Code", ""))
    meta = response.get("ResponseMetadata", {})
    status = meta.get("HTTPStatusCode")
    named = f"HTTP {status}" + (f" {code}" if code and code != str(status) else "")
    if status in (301, 302, 307, 308):
        where = meta.get("HTTPHeaders", {}).get("location") or response.get("Error", {}).get("Endpoint")
        return (f"{named}: the server redirects to {where or 'another endpoint'}: the bucket is in another region or "
                "endpoint; set AWS_REGION, or --s3-endpoint")
    why = {403: "the server refused the request: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the bucket's "
                "permissions)",
           404: "no such bucket (or object)"}.get(status)
    return f"{named}: {why or ('the server failed the request' if (status or 500) >= 500 else 'the server refused the request')}"


def _call(s3, url: str, action, *args, **kw):
    """action(*args, **kw), a request of client s3's; its failure one line (failure)."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return action(*args, **kw)
    except (BotoCoreError, ClientError) as e:
        raise failure(url, e, s3) from None


def _status(error: Exception) -> int | None:
    """The HTTP status of a boto3 failure's answer (None: no answer came: a timeout, a lost connection)."""
    response = getattr(error, "response", None) or {}
    return response.get("ResponseMetadata", {}).get("HTTPStatusCode")


def _missing(error: Exception) -> bool:
    """Whether a boto3 failure is a 404 (no such object, no such upload): an answer, not an error."""
    return _status(error) == 404


def head(s3, url: str) -> dict | None:
    """The object's HEAD answer, or None where there is none."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split(url)
    try:
        return s3.head_object(Bucket=bucket, Key=key)
    except (BotoCoreError, ClientError) as e:
        if _missing(e):
            return None
        raise failure(url, e, s3) from None


def mark_of(answer: dict | None) -> dict | None:
    """gdsbench's mark in a HEAD answer's metadata (servers may change the key's case), or None."""
    for key, value in ((answer or {}).get("Metadata") or {}).items():
        if key.lower() == MARK:
            try:
                mark = json.loads(value)
            except ValueError:
                return None
            return mark if isinstance(mark, dict) else None
    return None


def pattern_bytes(offset: int, length: int, seed: int) -> bytes:
    """The pattern `gdsbench prepare` writes (native/pattern.hpp) for [offset, offset + length),
    both multiples of 4 KiB."""
    buffer = np.empty(length, dtype=np.uint8)
    _native.pattern_fill(buffer, offset, seed)
    return buffer.tobytes()


@dataclass(frozen=True)
class Written:
    url: str
    size: int
    reused: bool  # an object of gdsbench's of this size and seed was kept as it was


def check_may_write(s3, url: str) -> dict | None:
    """The HEAD answer for the object at url if gdsbench made it (so may replace it); None if
    there is no object. UsageError for an object gdsbench did not make."""
    answer = head(s3, url)
    if answer is None:
        return None
    if mark_of(answer) is None:
        raise UsageError(f"PATH {url}: refusing to overwrite an object gdsbench did not create (it has no "
                         f"x-amz-meta-{MARK}); choose a new key or remove it yourself")
    return answer


MIN_PART, MAX_PARTS = 5 * 1024 * 1024, 10_000  # S3's rules for an upload in parts (all but the last part)


def check_upload(url: str, size: int, spec) -> None:
    """UsageError unless a job (a JobSpec) can write the object at url as S3 writes one: whole
    (its region all of it), by one upload (one thread of one process: a write of part of it would
    shorten it), in parts of --bs (at least MIN_PART, at most MAX_PARTS of them, the last whole),
    or in one PUT where --bs is its size. Verified by reading it back after, not in the run."""
    if spec.offset or (spec.size and spec.size != size):
        raise UsageError(f"--size/--offset: an S3 object is written whole ({url}: {format_size(size)}); drop "
                         "--size and --offset")
    if spec.threads > 1 or (spec.procs > 1 and spec.layout != "per-proc"):
        flag = f"--threads {spec.threads}" if spec.threads > 1 else f"--procs {spec.procs}"
        raise UsageError(f"{flag}: an S3 object is written by one upload, from one thread; raise --qd for more "
                         "parts in flight (or --layout per-proc: an object per process)")
    parts = size // spec.bs
    if parts > 1 and (spec.bs < MIN_PART or size % spec.bs or parts > MAX_PARTS):
        raise UsageError(f"--bs {format_size(spec.bs)}: {url} ({format_size(size)}) is uploaded in parts of --bs, "
                         f"which S3 takes from {format_size(MIN_PART)}, at most {MAX_PARTS:,} of them, the object a "
                         f"whole number of them; give such a --bs, or --bs {format_size(size).replace(' ', '')} for one PUT")
    passes = bool(spec.runtime_ns) or (spec.io_size or size) > size  # the object written more than once
    if parts > 1 and spec.qd > parts and passes:
        raise UsageError(f"--qd {spec.qd}: more than the {parts} parts of {url}, written more than once, so a part "
                         f"would be in flight twice (which copy the server keeps is not known); use --qd {parts} or "
                         "less")
    if parts <= 1 and spec.qd > 1:
        raise UsageError(f"--qd {spec.qd}: --bs {format_size(spec.bs)} writes all of {url} in one PUT, and PUTs of "
                         "one object at once replace one another; use --qd 1, or a smaller --bs for parts in flight")
    if spec.verify:
        raise UsageError("--verify with writes to an S3 object: read it back with a run of --rw read --verify after it")
    if spec.fsync_every:
        raise UsageError("--fsync-every with an S3 object: it is completed once, when its writes end")


def _only_if(answer: dict | None) -> dict:
    """The condition a write carries, so it lands only on what was looked at: no object there
    (If-None-Match: *), or the very object of gdsbench's seen (If-Match: its ETag). A server
    that ignores conditions (rclone's) is still held to the look before."""
    return {"IfNoneMatch": "*"} if answer is None else {"IfMatch": answer["ETag"]}


def put_pattern(url: str, size: int, *, seed: int = 1, force: bool = False, progress=None,
                size_flag: str = "--size", s3=None) -> Written:
    """Upload (or keep) a pattern object of `size` bytes at url, marked as gdsbench's: in one
    PUT up to MULTIPART bytes, else in parts of MULTIPART, up to PARALLEL_PARTS at a time (an
    upload that fails or is interrupted is aborted: nothing half-written gets the name).
    `progress(done, total)` is called as parts go."""
    if size <= 0 or size % BLOCK:
        raise UsageError(f"{size_flag} {size}: must be a positive multiple of 4 KiB, e.g. 1G")
    bucket, key = split(url)
    if not key or key.endswith("/"):
        raise UsageError(f"PATH {url}: name an object, s3://BUCKET/KEY (a prefix ending in / is for --workload)")
    s3 = s3 or client()
    seen = check_may_write(s3, url)
    abort_leftovers(s3, url)
    mark = mark_of(seen)
    if mark is not None and not force and mark.get("size") == size and mark.get("seed") == seed:
        return Written(url, size, reused=True)
    metadata = {MARK: json.dumps({"size": size, "seed": seed})}
    if size <= MULTIPART:
        _call(s3, url, s3.put_object, Bucket=bucket, Key=key, Body=pattern_bytes(0, size, seed), Metadata=metadata,
              **_only_if(seen))
        if progress:
            progress(size, size)
        return Written(url, size, reused=False)
    upload = _call(s3, url, s3.create_multipart_upload, Bucket=bucket, Key=key, Metadata=metadata)["UploadId"]
    note = _note_upload(url, upload)
    try:
        parts = _upload_parts(s3, url, upload, size, seed, progress)
        _call(s3, url, s3.complete_multipart_upload, Bucket=bucket, Key=key, UploadId=upload,
              MultipartUpload={"Parts": parts}, **_only_if(seen))
    except BaseException:
        try:
            s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
            _forget(note)
        except Exception:  # noqa: BLE001 - the first failure is the one to report; the note stays for the next
            pass
        raise
    _forget(note)
    return Written(url, size, reused=False)


# ---- uploads gdsbench started, noted until they end, so a killed prepare's is aborted by the next ----

def _uploads_folder() -> str:
    """Where the notes are: $XDG_STATE_HOME/gdsbench/uploads, else ~/.local/state/gdsbench/uploads."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "gdsbench", "uploads")


def _key_tag(url: str) -> str:
    """The notes' name for an object: its URL at its endpoint, hashed (a file name of any key)."""
    return hashlib.sha256(f"{endpoint() or ''} {url}".encode()).hexdigest()[:24]


def process_start(pid: int) -> str | None:
    """When process pid started (clock ticks after boot, /proc/PID/stat), None if there is none:
    a pid and its start together name one process, whatever the pid is reused for later."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _note_upload(url: str, upload: str) -> str | None:
    """A note of an upload this process started, until it is completed or aborted; its path
    (None where no note can be written: the upload is still aborted if this process fails)."""
    folder = _uploads_folder()
    path = os.path.join(folder, f"{_key_tag(url)}-{hashlib.sha256(upload.encode()).hexdigest()[:16]}.json")
    note = {"endpoint": endpoint() or "", "url": url, "upload": upload, "pid": os.getpid(),
            "started": process_start(os.getpid())}
    try:
        os.makedirs(folder, exist_ok=True)
        with open(path, "w") as f:
            json.dump(note, f)
    except OSError:
        return None
    return path


def _forget(note: str | None) -> None:
    if note:
        try:
            os.unlink(note)
        except OSError:
            pass


def abort_leftovers(s3, url: str) -> None:
    """Abort the uploads to url that gdsbench started and whose process is gone (a killed prepare's):
    an incomplete upload holds the server's space (and is billed) until aborted. Only noted ones: an
    upload of the same key by anyone else, or by a prepare still running, is left alone."""
    bucket, key = split(url)
    for path in sorted(glob(os.path.join(_uploads_folder(), f"{_key_tag(url)}-*.json"))):
        try:
            with open(path) as f:
                note = json.load(f)
        except (OSError, ValueError):
            continue
        if not isinstance(note, dict) or note.get("url") != url or note.get("endpoint") != (endpoint() or ""):
            continue
        if note.get("started") is not None and process_start(int(note.get("pid", 0))) == note["started"]:
            continue  # its prepare is still running
        _abort(s3, url, bucket, key, str(note.get("upload")))
        _forget(path)


def _abort(s3, url: str, bucket: str, key: str, upload: str) -> None:
    """Abort an upload; one already gone (completed, aborted, expired) is no error."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
    except (BotoCoreError, ClientError) as e:
        if not _missing(e):
            raise failure(url, e, s3) from None


PARALLEL_PARTS = 4  # parts in flight at once (each MULTIPART bytes of memory)


def _upload_parts(s3, url: str, upload: str, size: int, seed: int, progress) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor

    bucket, key = split(url)
    starts = range(0, size, MULTIPART)
    done = 0

    def part(number: int, start: int) -> dict:
        body = pattern_bytes(start, min(MULTIPART, size - start), seed)
        answer = _call(s3, url, s3.upload_part, Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=body)
        return {"PartNumber": number, "ETag": answer["ETag"]}

    out = []
    with ThreadPoolExecutor(PARALLEL_PARTS) as pool:
        for finished in pool.map(part, range(1, len(starts) + 1), starts):
            out.append(finished)
            done = min(size, done + MULTIPART)
            if progress:
                progress(done, size)
    return out


def _text_mark(text: str) -> dict:
    """The metadata of a small object of gdsbench's: its mark (a text carries no pattern: seed 0)."""
    return {MARK: json.dumps({"size": len(text.encode()), "seed": 0})}


def put_text(s3, url: str, text: str) -> None:
    """A small object of gdsbench's (a dataset's manifest), marked as its own."""
    bucket, key = split(url)
    seen = check_may_write(s3, url)
    _call(s3, url, s3.put_object, Bucket=bucket, Key=key, Body=text.encode(), Metadata=_text_mark(text),
          **_only_if(seen))


def get_text(s3, url: str) -> str | None:
    """A small object's text, or None where there is none."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split(url)
    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode(errors="replace")  # (not ours: no JSON)
    except (BotoCoreError, ClientError) as e:
        if _missing(e):
            return None
        raise failure(url, e, s3) from None


def list_objects(s3, prefix_url: str) -> list[tuple[str, int]]:
    """(url, size) of every object under a prefix, in key order."""
    return [(o.url, o.size) for o in list_entries(s3, prefix_url)]


@dataclass(frozen=True)
class Entry:
    url: str
    size: int
    etag: str  # the version listed: what a manifest records and a later look compares


def list_entries(s3, prefix_url: str) -> list[Entry]:
    """Every object under a prefix, with its ETag, in key order."""
    bucket, prefix = split(prefix_url)
    out = []
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    for page in _call(s3, prefix_url, list, pages):
        out.extend(Entry(f"s3://{bucket}/{o['Key']}", int(o["Size"]), o.get("ETag", "")) for o in page.get("Contents", ()))
    return sorted(out, key=lambda e: e.url)


def folders_under(s3, prefix_url: str) -> list[str]:
    """The "folders" right under a prefix (its keys' common prefixes up to the next /), as URLs
    without the trailing /."""
    bucket, prefix = split(prefix_url)
    out = []
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, Delimiter="/")
    for page in _call(s3, prefix_url, list, pages):
        out.extend(f"s3://{bucket}/{p['Prefix'].rstrip('/')}" for p in page.get("CommonPrefixes", ()))
    return sorted(out)


DELETE_BATCH = 1000  # keys per DeleteObjects request, S3's most


def delete_objects(s3, urls: list[str]) -> None:
    """Delete objects gdsbench made (the caller has checked each is), DELETE_BATCH keys a request;
    a key the server would not delete is one line naming it."""
    by_bucket: dict[str, list[str]] = {}
    for url in urls:
        bucket, key = split(url)
        by_bucket.setdefault(bucket, []).append(key)
    for bucket, keys in by_bucket.items():
        for at in range(0, len(keys), DELETE_BATCH):
            batch = [{"Key": k} for k in keys[at:at + DELETE_BATCH]]
            answer = _call(s3, f"s3://{bucket}/{keys[at]}", s3.delete_objects, Bucket=bucket,
                           Delete={"Objects": batch, "Quiet": True})
            for error in answer.get("Errors", ()):
                raise UsageError(f"s3://{bucket}/{error.get('Key')}: the server would not delete it ({error.get('Code')}: "
                                 f"{error.get('Message')})")


def abort_uploads_under(s3, prefix_url: str, only: set[str]) -> int:
    """Abort the uploads in parts under a prefix gdsbench owns to the keys `only` names (URLs: the
    objects a manifest of gdsbench's planned), every page of them (a run killed mid-write left them
    holding the server's space); another's upload of any other key is left alone. The number aborted."""
    bucket, prefix = split(prefix_url)
    aborted, after = 0, {}
    while True:
        answer = _call(s3, prefix_url, s3.list_multipart_uploads, Bucket=bucket, Prefix=prefix, **after)
        for u in answer.get("Uploads") or ():
            url = f"s3://{bucket}/{u['Key']}"
            if url in only:
                _abort(s3, url, bucket, u["Key"], u["UploadId"])
                aborted += 1
        if not answer.get("IsTruncated"):
            return aborted
        after = {"KeyMarker": answer.get("NextKeyMarker", ""), "UploadIdMarker": answer.get("NextUploadIdMarker", "")}


def put_new(s3, url: str, text: str, replacing: str | None = None) -> str | None:
    """A small marked object of gdsbench's put only where none is there (If-None-Match), or only
    over the version `replacing` names (If-Match: an ETag); its new ETag, or None where the
    condition failed (another put one first). A server that ignores conditions (rclone's) is held
    only to the caller's look before."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split(url)
    condition = {"IfMatch": replacing} if replacing else {"IfNoneMatch": "*"}
    try:
        answer = s3.put_object(Bucket=bucket, Key=key, Body=text.encode(), **condition, Metadata=_text_mark(text))
    except (BotoCoreError, ClientError) as e:
        if _status(e) in (409, 412):
            return None
        raise failure(url, e, s3) from None
    return answer.get("ETag")


def delete_version(s3, url: str, etag: str) -> None:
    """Delete an object of gdsbench's if it is still the version named (a lock this process holds)."""
    answer = head(s3, url)
    if answer is not None and answer.get("ETag") == etag:
        bucket, key = split(url)
        _call(s3, url, s3.delete_object, Bucket=bucket, Key=key)
