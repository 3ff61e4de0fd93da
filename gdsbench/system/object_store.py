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
is aborted, so no half-written object ever has the name.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import numpy as np

from gdsbench import _native
from gdsbench.job.errors import UsageError

MARK = "gdsbench-prepared"  # the metadata key (S3 sends it as x-amz-meta-gdsbench-prepared)
MULTIPART = 64 * 1024 * 1024  # objects larger than this are uploaded in parts of this size
BLOCK = _native.PATTERN_BLOCK


def is_s3(name: str) -> bool:
    return name.startswith("s3://")


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


def client():
    """A boto3 S3 client for the environment's credentials and endpoint."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError:
        raise UsageError("writing or listing s3:// needs boto3, the AWS SDK for Python: pip install 'gdsbench[s3]'") \
            from None
    url = endpoint()
    config = Config(s3={"addressing_style": "path"} if url else {}, retries={"max_attempts": 3, "mode": "standard"})
    return boto3.client("s3", region_name=region(), endpoint_url=url, verify=os.environ.get("AWS_CA_BUNDLE") or None,
                        config=config)


def failure(url: str, error: Exception) -> UsageError:
    """A boto3 failure as one line naming the object and the fix."""
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    if isinstance(error, NoCredentialsError):
        return UsageError(f"PATH {url}: no S3 credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
    if isinstance(error, EndpointConnectionError):
        return UsageError(f"PATH {url}: cannot connect to the S3 endpoint {endpoint() or 'of AWS'}; check "
                          "--s3-endpoint or AWS_ENDPOINT_URL")
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        why = {403: "the server refused the request: check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the "
                    "bucket's permissions)",
               404: "no such bucket (or object)"}.get(status, "the server failed the request")
        return UsageError(f"PATH {url}: HTTP {status} {code}: {why}")
    return UsageError(f"PATH {url}: {error}")


def _call(url: str, action, *args, **kw):
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return action(*args, **kw)
    except (BotoCoreError, ClientError) as e:
        raise failure(url, e) from None


def _missing(error: Exception) -> bool:
    """Whether a boto3 failure is a 404 (no such object): an answer, not an error."""
    return getattr(error, "response", {}).get("ResponseMetadata", {}).get("HTTPStatusCode") == 404


def head(s3, url: str) -> dict | None:
    """The object's HEAD answer, or None where there is none."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split(url)
    try:
        return s3.head_object(Bucket=bucket, Key=key)
    except (BotoCoreError, ClientError) as e:
        if _missing(e):
            return None
        raise failure(url, e) from None


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
    mark = mark_of(seen)
    if mark is not None and not force and mark.get("size") == size and mark.get("seed") == seed:
        return Written(url, size, reused=True)
    metadata = {MARK: json.dumps({"size": size, "seed": seed})}
    if size <= MULTIPART:
        _call(url, s3.put_object, Bucket=bucket, Key=key, Body=pattern_bytes(0, size, seed), Metadata=metadata,
              **_only_if(seen))
        if progress:
            progress(size, size)
        return Written(url, size, reused=False)
    upload = _call(url, s3.create_multipart_upload, Bucket=bucket, Key=key, Metadata=metadata)["UploadId"]
    try:
        parts = _upload_parts(s3, url, upload, size, seed, progress)
        _call(url, s3.complete_multipart_upload, Bucket=bucket, Key=key, UploadId=upload,
              MultipartUpload={"Parts": parts}, **_only_if(seen))
    except BaseException:
        try:
            s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload)
        except Exception:  # noqa: BLE001 - the first failure is the one to report
            pass
        raise
    return Written(url, size, reused=False)


PARALLEL_PARTS = 4  # parts in flight at once (each MULTIPART bytes of memory)


def _upload_parts(s3, url: str, upload: str, size: int, seed: int, progress) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor

    bucket, key = split(url)
    starts = range(0, size, MULTIPART)
    done = 0

    def part(number: int, start: int) -> dict:
        body = pattern_bytes(start, min(MULTIPART, size - start), seed)
        answer = _call(url, s3.upload_part, Bucket=bucket, Key=key, UploadId=upload, PartNumber=number, Body=body)
        return {"PartNumber": number, "ETag": answer["ETag"]}

    out = []
    with ThreadPoolExecutor(PARALLEL_PARTS) as pool:
        for finished in pool.map(part, range(1, len(starts) + 1), starts):
            out.append(finished)
            done = min(size, done + MULTIPART)
            if progress:
                progress(done, size)
    return out


def put_text(s3, url: str, text: str) -> None:
    """A small object of gdsbench's (a dataset's manifest), marked as its own."""
    bucket, key = split(url)
    seen = check_may_write(s3, url)
    _call(url, s3.put_object, Bucket=bucket, Key=key, Body=text.encode(),
          Metadata={MARK: json.dumps({"size": len(text.encode()), "seed": 0})}, **_only_if(seen))


def get_text(s3, url: str) -> str | None:
    """A small object's text, or None where there is none."""
    from botocore.exceptions import BotoCoreError, ClientError

    bucket, key = split(url)
    try:
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()
    except (BotoCoreError, ClientError) as e:
        if _missing(e):
            return None
        raise failure(url, e) from None


def list_objects(s3, prefix_url: str) -> list[tuple[str, int]]:
    """(url, size) of every object under a prefix, in key order."""
    bucket, prefix = split(prefix_url)
    out = []
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    for page in _call(prefix_url, list, pages):
        out.extend((f"s3://{bucket}/{o['Key']}", int(o["Size"])) for o in page.get("Contents", ()))
    return sorted(out)
