"""Who uses the cache and what each request asks of it, as the reference draws it
(kv-cache.py at mlcommons/storage 17335a7: UserSimulator, process_requests):

- a user is a chatbot, coding or document user (uniformly), with a context length,
  a generation length and a think time drawn once from its kind's ranges;
- each request after a think of 0.8-1.2 x the user's think time asks a context of
  randint(context // 4, context) tokens and a generation of randint(gen // 4, gen);
- a conversation goes on with probability 0.8 after each request; a request that
  continues one first reads the previous turn's KV entry (multi-turn reuse);
- prefill writes the request's entry (context x the model's KV bytes per token);
  decode reads it whole once, then once more per 32 generated tokens;
- generation itself waits 0, 2 or 30 ms a generated token (none, fast, realistic).

The users themselves are drawn as the reference draws them from --seed (the same
seed gives the same users: seed 42's first is a document user of 8122 tokens).
Their requests' draws, which the reference takes from one generator in whatever
order its threads come, come from each user's own generator seeded by (--seed,
user), so a run's requests are the same whatever the threads' timing."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

DECODE_BATCH = 32  # generated tokens per re-read of the entry (the reference's decode loop)
CONTINUE_CONVERSATION = 0.8
GENERATION_S_PER_TOKEN = {"none": 0.0, "fast": 0.002, "realistic": 0.030}


@dataclass(frozen=True)
class UserKind:
    name: str
    context: tuple[int, int]
    generation: tuple[int, int]
    think_s: tuple[float, float]


USER_KINDS = (
    UserKind("chatbot", (256, 1024), (50, 150), (0.1, 0.5)),
    UserKind("coding", (1024, 4096), (100, 500), (0.2, 1.0)),
    UserKind("document", (2048, 8192), (200, 800), (0.3, 1.5)),
)


@dataclass(frozen=True)
class Request:
    user: int
    number: int  # the user's n-th request, from 0
    conversation: int  # the user's n-th conversation, from 0
    turn: int  # in its conversation, from 1
    think_s: float  # waited before it is asked
    context_tokens: int
    generate_tokens: int

    @property
    def key(self) -> str:
        return f"u{self.user}-c{self.conversation}-t{self.turn}"

    @property
    def previous_key(self) -> str | None:
        """The previous turn's entry, read first (multi-turn reuse); None on a first turn."""
        return f"u{self.user}-c{self.conversation}-t{self.turn - 1}" if self.turn > 1 else None

    @property
    def decode_reads(self) -> int:
        return 1 + math.ceil(self.generate_tokens / DECODE_BATCH)


class User:
    """One user: its kind and lengths, and its requests one after another from its own generator."""

    def __init__(self, index: int, kind: UserKind, context: int, generation: int, think_s: float, seed: int,
                 multi_turn: bool = True):
        self.index = index
        self.kind, self.context, self.generation, self.think_s = kind, context, generation, think_s
        self.multi_turn = multi_turn
        self._random = random.Random(f"gdsbench-kvcache-{seed}-{index}")
        self._number = 0
        self._conversation = 0
        self._turn = 0

    def next_request(self) -> Request:
        r = self._random
        if self._turn and (not self.multi_turn or r.random() >= CONTINUE_CONVERSATION):
            self._conversation += 1
            self._turn = 0
        self._turn += 1
        request = Request(self.index, self._number, self._conversation, self._turn,
                          think_s=self.think_s * r.uniform(0.8, 1.2),
                          context_tokens=r.randint(self.context // 4, self.context),
                          generate_tokens=r.randint(self.generation // 4, self.generation))
        self._number += 1
        return request

    @property
    def asked(self) -> int:
        """Requests asked so far."""
        return self._number


def users(count: int, seed: int, multi_turn: bool = True) -> list[User]:
    """`count` users, drawn as the reference draws them after random.seed(seed)
    (UserSimulator.generate_mixed_users: a kind, a QoS level it uses for no I/O, then the
    kind's lengths), so the same seed gives both the same users."""
    draw = random.Random(seed)
    out = []
    for i in range(count):
        kind = draw.choice(USER_KINDS)
        draw.random()  # its QoS level
        out.append(User(i, kind, draw.randint(*kind.context), draw.randint(*kind.generation),
                        draw.uniform(*kind.think_s), seed, multi_turn))
    return out
