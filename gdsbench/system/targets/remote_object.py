"""An object behind a URL: http://, https://, s3://BUCKET/KEY (signed with
the AWS credentials and endpoint of the environment, as the AWS tools and
kvikio read them) or ftp(s)://[USER@]HOST/PATH (its password from ~/.netrc): the
schemes the native curl engine's protocols declare. That engine answers for
it: it asks the server once (HEAD; FTP's SIZE) when the target is looked at, so a missing object, refused
credentials or a server that does not answer fail before anything runs.
Every request, that look and a pattern block's read included, is asked as the
run asks (asking_of: --timeout, --retries, --http2). Credentials the AWS tools
find outside the environment (~/.aws/credentials, a profile, an instance role)
are handed to the engine (object_store.share_credentials).

There is no page cache to drop on this host, and a server's own cache cannot
be seen: a held region measures nothing (None), and runs say so."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from gdsbench import _native
from gdsbench.job.errors import UsageError
from gdsbench.job.spec import ENGINE_INFO, OPTIONS, JobSpec
from gdsbench.job.units import format_size
from gdsbench.system import object_store
from gdsbench.system.targets._served import OnAServer, engine_opening

OPENED_AS = "url"
# the engine that looks at and reads these targets: the native one that declares it opens a URL (curl),
# as resolve_engine picks it for a run
ENGINE = engine_opening(OPENED_AS)
SCHEMES = tuple(ENGINE_INFO[ENGINE]["schemes"])  # its protocols' schemes, declared once in protocols.cpp
WHAT = {"s3": "an S3 object", "http": "an HTTP object", "ftp": "a file on an FTP server"}  # for messages
# The protocols that write a target only whole, in one request by one writer, and keep no mark (so
# gdsbench knows its own by the pattern): the request, and what the target is called (the curl
# engine's WholeUploads; S3 writes in parts, object_store.check_upload).
WHOLE_WRITES = {"http": ("PUT", "object"), "ftp": ("STOR", "file")}


def written_noun(protocol: str) -> str:
    """What a target on a server is called where it is written, with its article: "an object"
    (WebDAV's), "a file" (FTP's, a share's)."""
    noun = WHOLE_WRITES[protocol][1] if protocol in WHOLE_WRITES else "file"
    return f"a{'n' if noun[0] in 'aeiou' else ''} {noun}"


def asking_of(spec: JobSpec | None = None) -> dict[str, int]:
    """How gdsbench asks a server, every request alike (a look, a pattern block, a listing, the
    run's reads): the job's curl options (--timeout, --retries, --http2) as the user gave them;
    for a command without a job, their defaults."""
    spec = JobSpec() if spec is None else spec
    return {o.name: int(getattr(spec, o.name)) for o in OPTIONS if o.engine == ENGINE}


@dataclass(frozen=True)
class RemoteObject(OnAServer):
    OPENED_AS: ClassVar[str] = OPENED_AS
    ENGINE: ClassVar[str] = ENGINE
    path: str
    kind: str  # its protocol: "http", "s3", "ftp"
    size: int
    facts: dict = field(default_factory=dict)  # what the server said: url, protocol, HTTP version, address
    asking: dict = field(default_factory=asking_of, repr=False, compare=False)  # how it is asked (asking_of)
    device: None = None
    mount: None = None

    @classmethod
    def open(cls, name: str, need: int = 0, asking: dict | None = None) -> RemoteObject:
        unavailable = ENGINE_INFO[ENGINE]["unavailable"]
        if unavailable:
            raise UsageError(f"PATH {name}: reading URLs needs the {ENGINE} engine, not available here: {unavailable}")
        if cls.protocol(name) == "s3":
            object_store.share_credentials()
        asking = asking_of() if asking is None else asking
        facts = _native.probe_target(ENGINE, name, asking)
        return cls(path=name, kind=facts.get("protocol", "http"), size=int(facts.pop("size")), facts=facts,
                   asking=asking)

    @property
    def where(self) -> str:
        return f"{WHAT.get(self.kind, 'an object')} at {self.facts.get('server_ip') or 'a remote server'}"

    def requests(self, engine: str, direction: str = "read") -> str:
        """How its requests travel, for data-path labels: "S3 over HTTP/1.1, curl engine ranged GETs";
        a protocol that is not HTTP's by its own name ("FTP, curl engine ranged reads"); writes:
        "S3 over HTTP/1.1, curl engine PUTs (an upload in parts, or the object whole)"."""
        version = self.facts.get("http_version")
        over = f" over {version}" if version else ""
        if direction == "write" and self.kind in WHOLE_WRITES:
            request, noun = WHOLE_WRITES[self.kind]
            return f"{self.kind.upper()}{over}, {engine} engine {request}s (the {noun} whole)"
        if direction == "write":
            return f"{self.kind.upper()}{over}, {engine} engine PUTs (an upload in parts, or the object whole)"
        return f"{self.kind.upper()}{over}, {engine} engine ranged {'GETs' if version else 'reads'}"

    def check_may_write(self, spec=None) -> None:
        """Only into an S3 object gdsbench made (its mark, x-amz-meta-gdsbench-prepared), and only
        as S3 writes one: whole, by one upload (the curl engine's Uploads; object_store.check_upload);
        or into an HTTP (WebDAV) object or FTP file of gdsbench's pattern, by one request of all of it."""
        if self.kind in WHOLE_WRITES:  # every protocol the curl engine speaks but S3's
            return self._check_whole_write(spec)
        if not self.facts.get("gdsbench_mark"):
            raise UsageError(f"PATH {self.path}: gdsbench did not create this object (it has no x-amz-meta-"
                             f"{object_store.MARK}), and writes only into objects it made; make one with "
                             "`gdsbench prepare s3://BUCKET/NEW --size 1G`")
        if spec is not None:
            object_store.check_upload(self.path, self.size, spec)

    def _check_whole_write(self, spec) -> None:
        """A WebDAV object (an FTP file) is PUT (STORed) whole, by one writer: --bs its size, one
        request in flight; and only one of gdsbench's pattern, every block of it (the server keeps no
        mark)."""
        request, noun = WHOLE_WRITES[self.kind]
        if spec is not None:
            if spec.offset or spec.bs < self.size or spec.qd > 1 or spec.threads > 1 or \
                    (spec.procs > 1 and spec.layout != "per-proc"):
                raise UsageError(f"--bs {format_size(spec.bs)}: an {self.kind.upper()} {noun} is written whole, in "
                                 f"one {request}, by one writer ({self.path}: {format_size(self.size)}); give --bs "
                                 f"{format_size(self.size).replace(' ', '')}, --qd 1 and one thread")
            if spec.verify or spec.fsync_every or spec.fsync_end:
                raise UsageError(f"--verify/--fsync: not with writes of an {self.kind.upper()} {noun}; read it back "
                                 "with a run of --verify after")
        if not self.all_pattern():
            raise UsageError(f"PATH {self.path}: not {written_noun(self.kind)} gdsbench made (not "
                             f"its pattern in every block), and gdsbench writes only into {noun}s it made; make one "
                             "at another name (`gdsbench prepare URL --size SIZE`), then write into it")

    def created_by_gdsbench(self) -> bool:
        """Whether `gdsbench prepare` uploaded it: its mark in the object's metadata (object_store.py),
        as the server answered when it was looked at; an HTTP server keeps none (check_may_write reads
        its pattern instead)."""
        return "gdsbench_mark" in self.facts


TARGET = RemoteObject
