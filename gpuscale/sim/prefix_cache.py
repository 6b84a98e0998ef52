"""One engine's prefix cache: an LRU over KV block ids, with the bulk operations a long prompt needs done in C.

vLLM keeps cached blocks that no running request holds in its free-block queue and evicts from its head
(``BlockPool`` in ``vllm/v1/core/block_pool.py``); a finished request's blocks are freed tail first
(``SingleTypeKVCacheManager.free`` in ``vllm/v1/core/single_type_kv_cache_manager.py`` frees ``reversed`` blocks "so
that the tail blocks are freed first"). The engine hands this cache each prompt's blocks tail first, so a block is
always evicted before the blocks in front of it: with block ids that name their whole prefix (as vLLM's chained block
hashes do) the cached part of any prompt is a prefix of it, and ``held`` finds its length by bisection.

The order is kept as a queue of batches (one per use, stamped) rather than an ``OrderedDict``: a long prompt moves
hundreds of blocks per request, and an ``OrderedDict`` rebuilds its node index whenever churn resizes it (about 1 us
per block at 40,000 blocks, measured); a dict of stamps plus the batch queue costs tens of nanoseconds per block. A
block's live entry is the batch whose stamp the dict holds; older entries of it are skipped when reached.
"""

from __future__ import annotations

import itertools
import operator
from collections import deque
from collections.abc import Sequence

_SINK: deque[object] = deque(maxlen=0)
_drain = _SINK.extend
"""Consume an iterator in C."""

COMPACT_FACTOR = 4
"""Rebuild the batch queue when it holds this many times more entries than there are cached blocks (stale entries
of re-used blocks accumulate while nothing is evicted)."""


class PrefixCache:
    """Block ids, least recently used first; ``use`` marks blocks most recently used in the order given."""

    __slots__ = ("_batches", "_entries", "_stamp", "blocks")

    def __init__(self) -> None:
        self.blocks: dict[int, int] = {}
        """Cached block id -> the stamp of its live batch."""
        self._batches: deque[tuple[int, Sequence[int]]] = deque()
        self._entries = 0
        """Block entries in ``_batches``, live or stale."""
        self._stamp = 0

    def __len__(self) -> int:
        return len(self.blocks)

    def __bool__(self) -> bool:
        return bool(self.blocks)

    def __contains__(self, block: int) -> bool:
        return block in self.blocks

    def held(self, prefix: Sequence[int]) -> int:
        """Leading blocks of ``prefix`` held (the held ones are a prefix of it: bisect for its end)."""
        blocks = self.blocks
        if not prefix or not blocks:
            return 0
        if prefix[-1] in blocks:
            return len(prefix)
        lo, hi = 0, len(prefix) - 1  # prefix[:lo] held, prefix[hi] not
        while lo < hi:
            mid = (lo + hi) >> 1
            if prefix[mid] in blocks:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def use(self, blocks: Sequence[int]) -> None:
        """``blocks`` become the most recently used, the last of them the most recent (inserted if absent)."""
        if not blocks:
            return
        self._stamp += 1
        self.blocks.update(zip(blocks, itertools.repeat(self._stamp)))
        self._batches.append((self._stamp, blocks))
        self._entries += len(blocks)
        if self._entries > COMPACT_FACTOR * len(self.blocks) + 1024:
            self._compact()

    def evict(self, n: int) -> None:
        """Drop the ``n`` least recently used blocks (all of them if fewer are held)."""
        blocks, batches = self.blocks, self._batches
        while n > 0 and batches:
            stamp, batch = batches.popleft()
            self._entries -= len(batch)
            live = self._live(stamp, batch)
            if len(live) > n:  # the rest of this batch stays, at the head
                batches.appendleft((stamp, live[n:]))
                self._entries += len(live) - n
                live = live[:n]
            _drain(map(blocks.pop, live, itertools.repeat(None)))  # pop: an id listed twice in one prompt
            n -= len(live)

    def _live(self, stamp: int, batch: Sequence[int]) -> list[int]:
        """The blocks of ``batch`` whose live entry it is (all in C: a batch is hundreds of blocks)."""
        return list(itertools.compress(batch, map(operator.eq, map(self.blocks.get, batch), itertools.repeat(stamp))))

    def _compact(self) -> None:
        kept: deque[tuple[int, Sequence[int]]] = deque()
        for stamp, batch in self._batches:
            live = self._live(stamp, batch)
            if live:
                kept.append((stamp, live))
        self._batches = kept
        self._entries = sum(len(b) for _, b in kept)
