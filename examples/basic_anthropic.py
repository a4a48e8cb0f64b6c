"""Time a few Anthropic calls and print their percentiles (runs offline against the emulator).

    python examples/basic_anthropic.py            # emulator
    ANTHROPIC_API_KEY=... python examples/basic_anthropic.py --real
"""

from __future__ import annotations

import sys

import latencykit as lk


def run(client: lk.Anthropic) -> None:
    """Five one-turn questions, then the per-call records and the summary."""
    for question in ["What is TTFT?", "What is TPOT?", "Why track P99?", "What is prefill?", "What is decode?"]:
        msg = client.messages.create(
            model="claude-sonnet-5", max_tokens=128, messages=[{"role": "user", "content": question}]
        )
        rec = client.latency.last
        assert rec is not None
        print(f"{question:18} TTFT {rec.ttft * 1000:7.1f} ms  TPOT {(rec.tpot or 0) * 1000:5.1f} ms  "
              f"{msg.usage.output_tokens} tokens")
    print(client.latency.summary())


if __name__ == "__main__":
    if "--real" in sys.argv:
        run(lk.Anthropic())
    else:
        from latencykit.emulator import Emulator

        with Emulator() as emu:
            print("(latencies below are EMULATED)")
            run(lk.Anthropic(base_url=emu.base_url, api_key="emulator"))
