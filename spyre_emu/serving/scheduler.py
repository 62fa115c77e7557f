"""The scheduler as sendnn-inference (IBM's vLLM plugin for Spyre) runs it with chunked prefill,
in the simulator's words: which step runs next, and what each step leaves behind.

Rules (docs/serving.md has the reasons and what is simplified):
- A prompt is cut into chunks of ``chunk_tokens`` (a multiple of the 64-token KV block); the last
  chunk is padded to a whole block. One request prefills at a time, chunk after chunk.
- Prefix caching by whole chunks: a chunk lying wholly inside a prefix that an earlier request
  already computed is skipped (never the last chunk, which samples the first token).
- Never two prefill steps in a row while any request decodes; an ongoing prefill goes before a
  new one; the engine is never idle while there is work.
- A decode step runs every decoding request; sequences are left-padded to the batch's largest
  block count, so the step attends over 64 × that many keys.
- A waiting request is admitted (first come, first served, the head blocks the rest) only when no
  prefill is ongoing, fewer than ``max_num_seqs`` run, the KV blocks for prompt + output fit, no
  sequence left-padded to the batch's block count would pass ``max_model_len`` by its last token,
  and batch × longest sequence stays within ``max_batch_tkv`` over every decode step left.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from .steps import StepShape
from .workload import Request


@dataclass(frozen=True)
class SchedulerConfig:
    """Defaults: sendnn-inference's first verified configuration (max_model_len 3072, max_num_seqs 16),
    its chunk of 512, its 64-token blocks and VLLM_DT_MAX_BATCH_TKV_LIMIT of 131,072."""

    max_num_seqs: int = 16
    max_model_len: int = 3072
    chunk_tokens: int = 512
    block_tokens: int = 64
    max_batch_tkv: int = 131072
    kv_blocks: int = 1 << 40  # the card's KV capacity; the CLI sets it from the DRAM and the weights
    prefix_caching: bool = True
    tp: int = 1

    def problems(self) -> list[str]:
        bad = [f"{k} must be positive" for k in ("max_num_seqs", "max_model_len", "chunk_tokens", "block_tokens",
                                                  "max_batch_tkv", "kv_blocks", "tp") if getattr(self, k) <= 0]
        if self.block_tokens > 0 and self.chunk_tokens % self.block_tokens:
            bad.append(f"chunk_tokens must be a multiple of block_tokens ({self.block_tokens})")
        return bad


@dataclass
class Sequence:
    """A request inside the engine: ``computed`` prompt tokens in the KV cache (padded), ``generated``
    output tokens sampled so far, ``blocks`` KV blocks reserved for it."""

    request: Request
    blocks: int
    computed: int = 0
    generated: int = 0

    @property
    def length(self) -> int:
        """Tokens in the KV cache (unpadded): the prompt once prefilled, then one per decode step."""
        return self.request.prompt_tokens + max(self.generated - 1, 0) if self.generated else 0


@dataclass(frozen=True)
class Step:
    kind: str  # "prefill" or "decode"
    shape: StepShape
    requests: tuple[int, ...]  # request ids, in batch order
    volume: int = 0  # decode: batch × the longest sequence's keys (unpadded), what the volume limit bounds


@dataclass
class Scheduler:
    config: SchedulerConfig
    waiting: deque[Sequence] = field(default_factory=deque)
    running: list[Sequence] = field(default_factory=list)
    prefilling: Sequence | None = None
    last_kind: str = ""
    free_blocks: int = 0
    cached_chunks: set[tuple[int, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.free_blocks = self.config.kv_blocks

    def blocks_for(self, request: Request) -> int:
        return -(-(request.prompt_tokens + request.output_tokens - 1) // self.config.block_tokens)

    def refusal(self, request: Request) -> str | None:
        """Why the engine refuses ``request`` outright (vLLM answers it with an error), or None."""
        if request.prompt_tokens + request.output_tokens > self.config.max_model_len:
            return f"prompt + output ({request.prompt_tokens + request.output_tokens}) > max_model_len"
        if self.blocks_for(request) > self.config.kv_blocks:
            return "more KV blocks than the card holds"
        return None

    def add(self, request: Request) -> None:
        self.waiting.append(Sequence(request, self.blocks_for(request)))

    @property
    def decoding(self) -> list[Sequence]:
        return [s for s in self.running if s.generated]

    def next_step(self) -> Step | None:
        """The step to run now, or None when there is nothing to do until a request arrives."""
        decoding = self.decoding
        may_prefill = not (self.last_kind == "prefill" and decoding)
        if self.prefilling is None and may_prefill and self.waiting and self._admissible(self.waiting[0]):
            self._admit(self.waiting.popleft())
        if self.prefilling is not None and may_prefill:
            return self._prefill_step(self.prefilling)
        if decoding:
            return self._decode_step(decoding)
        return None

    def finish(self, step: Step) -> tuple[list[int], list[int]]:
        """Apply a completed step: the ids that got a token, and the ids that finished."""
        self.last_kind = step.kind
        seqs = [s for s in self.running if s.request.id in step.requests]
        if step.kind == "prefill":
            seq = seqs[0]
            seq.computed = step.shape.tkv
            self._remember_prefix(seq)
            if seq.computed < self._padded_prompt(seq.request):
                return [], []
            self.prefilling = None
        for seq in seqs:
            seq.generated += 1
        done = [s for s in seqs if s.generated == s.request.output_tokens]
        for seq in done:
            self.running.remove(seq)
            self.free_blocks += seq.blocks
        return [s.request.id for s in seqs], [s.request.id for s in done]

    def _padded_prompt(self, request: Request) -> int:
        b = self.config.block_tokens
        return -(-request.prompt_tokens // b) * b

    def _admissible(self, seq: Sequence) -> bool:
        c = self.config
        if not self.running:
            return True
        if len(self.running) >= c.max_num_seqs or seq.blocks > self.free_blocks:
            return False
        together = [*self.running, seq]
        return max(self._aligned_finals(together)) <= c.max_model_len and self._peak_volume(together) <= c.max_batch_tkv

    def _aligned_finals(self, seqs: list[Sequence]) -> list[int]:
        """Each sequence's length at its last token, left-padded to the largest block count among them
        now (a new request counts with its whole prompt), as sendnn-inference checks max_model_len."""
        b = self.config.block_tokens
        now = [s.length or s.request.prompt_tokens for s in seqs]
        blocks = max(n // b for n in now)
        return [blocks * b + n % b + (s.request.prompt_tokens + s.request.output_tokens - 1 - n)
                for s, n in zip(seqs, now, strict=True)]

    @staticmethod
    def _peak_volume(seqs: list[Sequence]) -> int:
        """The largest batch × longest sequence (keys) over the decode steps left if no one else joins:
        it peaks at the last step of some sequence, when the batch is about to shrink."""
        left = [(s.length or s.request.prompt_tokens,
                 s.request.output_tokens - max(s.generated, 1)) for s in seqs]  # keys now, decode steps left
        peak = 0
        for last in {r - 1 for _, r in left if r > 0}:
            alive = [n for n, r in left if r > last]
            peak = max(peak, len(alive) * (max(alive) + last + 1))
        return peak

    def _admit(self, seq: Sequence) -> None:
        self.free_blocks -= seq.blocks
        self.running.append(seq)
        self.prefilling = seq
        r, c = seq.request, self.config
        last = (self._padded_prompt(r) - 1) // c.chunk_tokens
        skip = 0
        while (c.prefix_caching and skip < last and (skip + 1) * c.chunk_tokens <= r.prefix_tokens
               and (r.prefix_id, skip) in self.cached_chunks):
            skip += 1
        seq.computed = skip * c.chunk_tokens

    def _remember_prefix(self, seq: Sequence) -> None:
        r, c = seq.request, self.config
        if c.prefix_caching and r.prefix_id >= 0 and seq.computed <= r.prefix_tokens \
                and seq.computed % c.chunk_tokens == 0:
            self.cached_chunks.add((r.prefix_id, seq.computed // c.chunk_tokens - 1))

    def _prefill_step(self, seq: Sequence) -> Step:
        end = min(seq.computed + self.config.chunk_tokens, self._padded_prompt(seq.request))
        return Step("prefill", StepShape(1, end - seq.computed, end, self.config.tp), (seq.request.id,))

    def _decode_step(self, decoding: list[Sequence]) -> Step:
        b = self.config.block_tokens
        longest = max(s.length for s in decoding) + 1  # this step's token is in the cache
        return Step("decode", StepShape(len(decoding), 1, -(-longest // b) * b, self.config.tp),
                    tuple(s.request.id for s in decoding), len(decoding) * longest)

    def used_blocks(self) -> int:
        """KV blocks holding tokens now (reserved ones may be more)."""
        b = self.config.block_tokens
        return sum(-(-max(s.length, s.computed) // b) for s in self.running)
