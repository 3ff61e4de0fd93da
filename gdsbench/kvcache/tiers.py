"""Where each KV entry lives: tiers fastest first (host memory, then storage),
each with a byte budget, and LRU spill between them (the reference's later
"waterfall LRU"): a new entry goes to the fastest tier it fits in; to make room
there the tier's least recently used entries move down a tier (a write there),
and the last tier's least recently used are dropped. A read touches its entry
(most recently used); nothing moves up.

Bookkeeping only, and thread safe: store() and lookup() decide under one lock
and hand back what must move; the caller moves the bytes (session.py). An entry
being written or read is pinned, so it is never moved or dropped under its
reader, and one not yet written (ready unset) is never chosen either."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

UNLIMITED = float("inf")


class NoRoom(ValueError):
    """No tier can take the entry now: what would make room is being read or written."""


@dataclass(eq=False)
class Entry:
    key: str
    size: int
    tier: int
    pins: int = 0
    ready: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True)
class Move:
    """Move `entry` from tier `source` to tier `to` (None: drop it)."""
    entry: Entry
    source: int
    to: int | None


class TieredCache:
    def __init__(self, names: list[str], budgets: list[float]):
        if len(names) != len(budgets) or not names:
            raise ValueError("a tier needs a name and a budget")
        self.names = list(names)
        self.budgets = list(budgets)
        self.used = [0] * len(names)
        self._lru: list[OrderedDict[str, Entry]] = [OrderedDict() for _ in names]  # oldest first
        self._entries: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self.moves = {}  # (source name, to name or "dropped") -> count

    def largest_entry(self) -> float:
        """The largest entry some tier can hold."""
        return max(self.budgets)

    def lookup(self, key: str) -> Entry | None:
        """The entry, pinned and made most recently used; None: not cached (a miss). unpin() it after."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.pins += 1
                self._lru[entry.tier].move_to_end(key)
            return entry

    def unpin(self, entry: Entry) -> None:
        with self._lock:
            entry.pins -= 1

    def store(self, key: str, size: int) -> tuple[Entry, list[Move]]:
        """A new entry (pinned, not ready) in the fastest tier it fits in, and the moves that make room,
        in the order they must run (a tier's room is made before anything moves into it). ValueError
        where no tier could ever take it, NoRoom where none can now (try again once others' reads end)."""
        with self._lock:
            if key in self._entries:
                raise ValueError(f"entry {key} is cached already")
            moves: list[Move] = []
            if size > self.largest_entry():
                raise ValueError(f"no tier has room for an entry of {size} bytes")
            for tier in range(len(self.names)):
                if size <= self.budgets[tier] and self._make_room(tier, size, moves):
                    break
            else:
                raise NoRoom(f"no tier has room for an entry of {size} bytes now")
            entry = Entry(key, size, tier, pins=1)
            self._place(entry, tier)
            return entry, moves

    def _place(self, entry: Entry, tier: int) -> None:
        entry.tier = tier
        self._entries[entry.key] = entry
        self._lru[tier][entry.key] = entry
        self.used[tier] += entry.size

    def _remove(self, entry: Entry) -> None:
        del self._entries[entry.key]
        del self._lru[entry.tier][entry.key]
        self.used[entry.tier] -= entry.size

    def _make_room(self, tier: int, size: int, moves: list[Move]) -> bool:
        """Room for `size` bytes in `tier`, by moving its least recently used entries down (the last
        tier drops them); False where pinned or unwritten entries leave too little to move."""
        need = self.used[tier] + size - self.budgets[tier]
        if need <= 0:
            return True
        movable, freed = [], 0
        for entry in self._lru[tier].values():
            if freed >= need:
                break
            if entry.pins == 0 and entry.ready.is_set():
                movable.append(entry)
                freed += entry.size
        if freed < need:
            return False
        below = tier + 1 if tier + 1 < len(self.names) else None
        for entry in movable:
            self._remove(entry)
            to = below
            if to is not None and not (entry.size <= self.budgets[to] and self._make_room(to, entry.size, moves)):
                to = None  # the tier below cannot take it either: dropped
            key = (self.names[tier], self.names[to] if to is not None else "dropped")
            self.moves[key] = self.moves.get(key, 0) + 1
            moved = Entry(entry.key, entry.size, tier)  # the same key, not ready until its bytes arrive
            if to is not None:
                moved.pins = 1  # pinned until the mover has written it
                self._place(moved, to)
            moves.append(Move(moved, tier, to))
        return True

    def moved(self, move: Move) -> None:
        """The caller moved the entry's bytes: readers may have it."""
        if move.to is not None:
            move.entry.ready.set()
            self.unpin(move.entry)

    def written(self, entry: Entry) -> None:
        entry.ready.set()
        self.unpin(entry)

    def forget(self, entry: Entry) -> None:
        """Take back an entry whose write failed."""
        with self._lock:
            if self._entries.get(entry.key) is entry:
                self._remove(entry)
