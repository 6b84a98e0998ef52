"""The prefix cache alone: held prefixes, tail-first LRU eviction, and agreement with a block-by-block LRU."""

from __future__ import annotations

import random
from collections import OrderedDict

from gpuscale.sim.prefix_cache import PrefixCache


class BlockLru:
    """The reference: an LRU over single block ids, a prompt's blocks freed tail first (what the tree must equal)."""

    def __init__(self) -> None:
        self.order: OrderedDict[int, None] = OrderedDict()

    def use(self, prefix: tuple[int, ...], blocks: int) -> None:
        for b in reversed(prefix[:blocks]):
            self.order[b] = None
            self.order.move_to_end(b)

    def evict(self, n: int) -> None:
        for _ in range(min(n, len(self.order))):
            self.order.popitem(last=False)

    def held(self, prefix: tuple[int, ...]) -> int:
        n = 0
        for b in prefix:
            if b not in self.order:
                break
            n += 1
        return n


def chain(*runs: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(b for run in runs for b in run)


SYSTEM = tuple(range(10))
A, B = tuple(range(100, 130)), tuple(range(200, 240))


def test_a_used_prompt_is_held_and_shared_blocks_are_held_once() -> None:
    c = PrefixCache()
    c.use(chain(SYSTEM, A), 40)
    c.use(chain(SYSTEM, B), 50)
    assert len(c) == 10 + 30 + 40
    assert c.held(chain(SYSTEM, A)) == 40 and c.held(chain(SYSTEM, B)) == 50
    assert c.held(chain(SYSTEM, (999,))) == 10  # the system prompt, then a block never seen
    assert c.held(chain(SYSTEM, A[:12], (998,))) == 22  # inside a run
    c.use(chain(SYSTEM, A), 25)  # only a part of A again: the run splits, nothing is added
    assert len(c) == 80 and c.held(chain(SYSTEM, A)) == 40


def test_eviction_takes_the_least_recently_used_prompt_from_its_tail() -> None:
    c = PrefixCache()
    c.use(chain(SYSTEM, A), 40)
    c.use(chain(SYSTEM, B), 50)  # A's own blocks are now the oldest; the shared system prompt is recent
    c.evict(25)
    assert c.held(chain(SYSTEM, A)) == 15 and c.held(chain(SYSTEM, B)) == 50
    c.evict(10)  # the rest of A's blocks, then B's tail
    assert c.held(chain(SYSTEM, A)) == 10 and c.held(chain(SYSTEM, B)) == 45
    c.evict(1000)
    assert len(c) == 0 and not c and c.held(SYSTEM) == 0


def test_the_tree_evicts_in_the_order_of_a_block_lru() -> None:
    """Conversations over a shared system prompt, each turn extending an earlier one (ids name their prefix)."""
    rng = random.Random(7)
    tree, ref = PrefixCache(), BlockLru()
    fresh = iter(range(10_000, 10**9))
    prompts: list[tuple[int, ...]] = [SYSTEM]
    for _ in range(3000):
        base = rng.choice(prompts[-30:])
        keep = rng.randint(0, len(base))
        prompt = base[:keep] + tuple(next(fresh) for _ in range(rng.randint(0, 40)))
        if not prompt:
            continue
        prompts.append(prompt)
        blocks = rng.randint(0, len(prompt))
        tree.use(prompt, blocks)
        ref.use(prompt, blocks)
        if rng.random() < 0.4:
            n = rng.randint(0, 60)
            tree.evict(n)
            ref.evict(n)
        assert len(tree) == len(ref.order)
        for q in rng.sample(prompts, min(5, len(prompts))):
            assert tree.held(q) == ref.held(q)
