"""A real Triton Inference Server (the ``tritonserver`` the nvidia-pytriton wheel bundles) serving a
tiny *decoupled* (streaming) text model, CPU only, for the Triton real-server tier.

    <pytriton venv>/bin/python scripts/triton_echo.py --http-port 8000 --grpc-port 8001 --metrics-port 8002

The model ``echo`` takes ``text_input`` (one string) and streams its words back one response each:
a "prefill" pause of ``--prefill`` seconds before the first, ``--decode`` seconds between the
others. Ask for it over Triton's HTTP generate extension, ``POST /v2/models/echo/generate_stream``
with ``{"text_input": "..."}``: Server-Sent Events, one ``data: {"text_output": ...}`` per word.

Run it with an interpreter built against the system's ``libpython`` (a venv made from the
distribution's ``/usr/bin/python3``): Triton's Python backend stub loads that library, and a
separately built Python crashed in the stub. ``scripts/triton_server.sh install`` makes that venv.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Iterator

import numpy as np
from pytriton.model_config import ModelConfig, Tensor
from pytriton.triton import Triton, TritonConfig


def main() -> None:
    """Parse the ports and timings, bind the model, serve until SIGTERM / SIGINT."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--metrics-port", type=int, default=8002)
    p.add_argument("--prefill", type=float, default=0.2, help="seconds before the first word")
    p.add_argument("--decode", type=float, default=0.02, help="seconds between words")
    args = p.parse_args()

    def echo(requests: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
        # Decoupled: a generator. Triton's execute() has returned long before the last word is sent,
        # which is why nv_inference_request_duration_us holds backend time, not the stream's.
        for request in requests:
            raw = request["text_input"].reshape(-1)[0]
            words = (raw.decode() if isinstance(raw, bytes) else str(raw)).split() or ["(empty)"]
            time.sleep(args.prefill)
            for i, word in enumerate(words):
                if i:
                    time.sleep(args.decode)
                yield [{"text_output": np.array([word.encode()], dtype=np.object_)}]

    config = TritonConfig(http_address="127.0.0.1", http_port=args.http_port, grpc_address="127.0.0.1",
                          grpc_port=args.grpc_port, metrics_port=args.metrics_port, allow_metrics=True)  # fmt: skip
    with Triton(config=config) as triton:
        triton.bind(
            model_name="echo",
            infer_func=echo,
            inputs=[Tensor(name="text_input", dtype=np.bytes_, shape=(1,))],
            outputs=[Tensor(name="text_output", dtype=np.bytes_, shape=(1,))],
            config=ModelConfig(batching=False, decoupled=True),
            strict=False,
        )
        triton.serve()


if __name__ == "__main__":
    main()
