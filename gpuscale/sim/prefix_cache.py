"""One engine's prefix cache: the KV blocks it holds for reuse, as a radix tree of block-id runs with LRU eviction.

What it models (vLLM v1):

* Block ids name their whole prefix, as vLLM's chained block hashes do (``hash_block_tokens`` hashes the parent
  block's hash with the block's tokens, ``vllm/v1/core/kv_cache_utils.py``): a prompt's cached part is the longest run
  of its leading blocks found along one path of the tree.
* Cached blocks no running request holds sit in vLLM's free-block queue and are evicted from its head (``BlockPool``,
  ``vllm/v1/core/block_pool.py``); a finished request's blocks are freed tail first (``SingleTypeKVCacheManager.free``,
  ``vllm/v1/core/single_type_kv_cache_manager.py``, frees ``reversed`` blocks "so that the tail blocks are freed
  first"). So the least recently used prompt is evicted from its last block backwards, and a block is never evicted
  before a block that follows it: the cached part of any prompt stays a prefix of it.

Why a tree of runs and not an LRU of blocks: a long prompt is hundreds of blocks, and an LRU keyed by block did
hundreds of dictionary operations per request (the prefix path ran 4-10x slower than the plain one). Here a use stamps
the nodes along the prompt's path (a handful: the system prompt, each earlier turn) and eviction trims the least
recently used leaf's run from its tail, so the work per request is in the number of runs, not blocks. Each use stamps
every node from the root down, so a node's stamp is never older than its children's: the least recently used block
is always at the tail of the least recently used leaf, the order an LRU of blocks freed tail first would give.

Why views: a node's run is ``src[lo:hi]`` of a prompt's id tuple, not a tuple of its own. Copying runs (a new node,
a leaf that grows, a split, a merge, an eviction that trims a tail) was most of the prefix path's cost with the
request path compiled: hundreds of ids copied per request, and the copies were young tuples the garbage collector
walked id by id. With views, a trim or a split moves an index. Where a run grows or two runs join, the node points at
the prompt just walked, at the same places: ids name their whole prefix, so any prompt through a node spells its run
with the same ids (the assumption every look-up here already makes).
"""

from __future__ import annotations

import itertools
from heapq import heappop, heappush


class _Node:
    __slots__ = ("children", "hi", "lo", "parent", "src", "stamp", "uid")

    def __init__(self, src: tuple[int, ...], lo: int, hi: int, parent: _Node | None, stamp: int, uid: int) -> None:
        self.src = src
        self.lo = lo
        self.hi = hi
        """The block ids this node adds to its parent's path: ``src[lo:hi]``, a view into a prompt's ids (module
        docstring, "Why views")."""
        self.parent = parent
        self.children: dict[int, _Node] = {}
        """Child by its run's first block id."""
        self.stamp = stamp
        self.uid = uid


class PrefixCache:
    """The held blocks of one engine; ``use`` marks a prompt's leading blocks most recently used (inserting those not
    held), ``evict`` drops the least recently used."""

    __slots__ = ("_leaves", "_memo", "_memo_held", "_memo_version", "_n", "_root", "_stamp", "_uids", "_version")

    def __init__(self) -> None:
        self._uids = itertools.count()
        self._root = _Node((), 0, 0, None, 0, next(self._uids))
        self._n = 0
        """Blocks held."""
        self._stamp = 0
        self._leaves: list[tuple[int, int, _Node]] = []
        """(stamp, uid, node) of leaves, oldest first; entries whose node has since changed are skipped."""
        self._version = 0
        """Bumped by every change of what is held (``use``, ``evict``)."""
        self._memo: tuple[int, ...] | None = None
        self._memo_version = -1
        self._memo_held = 0
        """The last ``held`` answer, for that prefix object at that version: the engine asks again for the request the
        router just asked about (its backlog at submit, its admission, its KV need) while nothing changed."""

    def __len__(self) -> int:
        return self._n

    def __bool__(self) -> bool:
        return self._n > 0

    def held(self, prefix: tuple[int, ...]) -> int:
        """Leading blocks of ``prefix`` held."""
        if prefix is self._memo and self._memo_version == self._version:
            return self._memo_held
        h = self._held(prefix)
        self._memo, self._memo_version, self._memo_held = prefix, self._version, h
        return h

    def _held(self, prefix: tuple[int, ...]) -> int:
        node, pos, n = self._root, 0, len(prefix)
        while pos < n:
            child = node.children.get(prefix[pos])
            if child is None:
                return pos
            end = pos + child.hi - child.lo
            if end <= n and prefix[end - 1] == child.src[child.hi - 1]:  # the same last id: the same run
                node, pos = child, end
                continue
            return pos + _common(child, prefix, pos, n)
        return pos

    def use(self, prefix: tuple[int, ...], blocks: int) -> None:
        """``prefix[:blocks]`` become the most recently used blocks (freed tail first: the first is the most recent)."""
        blocks = min(blocks, len(prefix))
        if blocks <= 0:
            return
        self._version += 1
        self._stamp += 1
        stamp = self._stamp
        node, pos = self._root, 0
        node.stamp = stamp
        path: list[_Node] = []
        while pos < blocks:
            child = node.children.get(prefix[pos])
            if child is None:  # the rest of the prompt is new
                self._n += blocks - pos
                if node.children or node is self._root:
                    child = _Node(prefix, pos, blocks, node, stamp, next(self._uids))
                    node.children[prefix[pos]] = child
                else:  # a leaf the prompt continues: it grows (its blocks and the new ones share the stamp)
                    node.src, node.lo, node.hi = prefix, pos - (node.hi - node.lo), blocks
                    child = path.pop()
                path.append(child)
                break
            length = child.hi - child.lo
            end = pos + length
            common = (
                length if end <= blocks and prefix[end - 1] == child.src[child.hi - 1]
                else _common(child, prefix, pos, blocks)
            )
            if common < length:  # the prompt leaves (or ends inside) this run: split it there
                child = self._split(child, common)
            child.stamp = stamp
            path.append(child)
            node, pos = child, pos + common
        self._merge(path, prefix)
        last = path[-1]
        if not last.children:
            heappush(self._leaves, (stamp, last.uid, last))

    def _merge(self, path: list[_Node], prefix: tuple[int, ...]) -> None:
        """Join each node of a just-used path to its only child: they share the stamp, so one run evicted from its
        tail keeps their order, and the next walk down this prompt is one node shorter. The joined run is the
        prompt's own ids at the same places (the path spells ``prefix`` from its start)."""
        i = 0
        pos = 0
        while i < len(path) - 1:
            upper, lower = path[i], path[i + 1]
            if len(upper.children) != 1:
                pos += upper.hi - upper.lo
                i += 1
                continue
            upper.src, upper.lo, upper.hi = prefix, pos, pos + (upper.hi - upper.lo) + (lower.hi - lower.lo)
            upper.children = lower.children
            for g in upper.children.values():
                g.parent = upper
            lower.parent = None  # its leaf entries are stale now
            del path[i + 1]

    def evict(self, n: int) -> None:
        """Drop the ``n`` least recently used blocks (all of them if fewer are held)."""
        leaves = self._leaves
        self._version += 1
        while n > 0 and leaves:
            stamp, uid, leaf = heappop(leaves)
            if leaf.children or leaf.stamp != stamp or leaf.uid != uid or leaf.parent is None:
                continue  # used again, grown, split or removed since this entry
            length = leaf.hi - leaf.lo
            if length > n:  # trim its tail; the rest stays, as old as it was
                leaf.hi -= n
                self._n -= n
                heappush(leaves, (stamp, uid, leaf))
                return
            n -= length
            self._n -= length
            parent = leaf.parent
            del parent.children[leaf.src[leaf.lo]]
            leaf.parent = None
            if not parent.children and parent.parent is not None:
                heappush(leaves, (parent.stamp, parent.uid, parent))

    def _split(self, node: _Node, at: int) -> _Node:
        """Cut ``node``'s run after ``at`` blocks; returns the new upper node (the lower part keeps ``node``)."""
        parent = node.parent
        assert parent is not None
        upper = _Node(node.src, node.lo, node.lo + at, parent, node.stamp, next(self._uids))
        parent.children[node.src[node.lo]] = upper
        node.lo += at
        node.parent = upper
        upper.children[node.src[node.lo]] = node
        return upper


def _common(node: _Node, prefix: tuple[int, ...], pos: int, stop: int) -> int:
    """Length of the common start of ``node``'s run and ``prefix[pos:stop]``. Ids name their whole prefix, so two paths
    that share an id at one depth share every id before it: bisect on single ids."""
    src, lo = node.src, node.lo
    hi = min(node.hi - lo, stop - pos)
    if prefix[pos + hi - 1] == src[lo + hi - 1]:
        return hi
    good = 0  # the run's first ``good`` ids match, its first ``hi`` do not
    while hi - good > 1:
        mid = (good + hi) >> 1
        if prefix[pos + mid - 1] == src[lo + mid - 1]:
            good = mid
        else:
            hi = mid
    return good
