#!/usr/bin/env python3
# gen_models.py N > models64.json   (deterministic; compact like llama-server's nlohmann dump())
import json, random, sys
random.seed(20251129)
N = int(sys.argv[1]) if len(sys.argv) > 1 else 64
orgs = ["meta-llama", "Qwen", "mistralai", "google", "microsoft", "ggml-org", "unsloth", "bartowski"]
fams = ["Llama-3.2-3B-Instruct", "Qwen2.5-7B-Instruct", "Mistral-7B-Instruct-v0.3", "gemma-3-4b-it",
        "Phi-4-mini-instruct", "SmolLM3-3B", "Qwen3-30B-A3B", "gpt-oss-20b"]
quants = ["Q4_K_M", "Q5_K_M", "Q8_0", "Q6_K", "IQ4_XS", "F16"]
roles = ["scout", "coder", "embed", "rerank", "chat", "vision"]
states = ["loaded"] * 5 + ["loading"] * 2 + ["unloaded"] * 6 + ["failed"] * 1
data = []
for i in range(N):
    org = orgs[i % len(orgs)]; fam = fams[(i * 3) % len(fams)]; q = quants[(i * 5) % len(quants)]
    mid = f"{org}/{fam}-{i}-{q}.gguf"
    st = random.choice(states)
    args = ["llama-server", "--port", str(50001 + i), "-m", f"/models/{fam}-{i}-{q}.gguf", "-c", str(random.choice([4096, 8192, 16384, 32768]))]
    if random.random() < 0.5:
        args += ["-ngl", "99", "--flash-attn", "on"]
    if st in ("loaded", "loading"):
        status = {"value": st, "args": args}
    elif st == "failed":
        status = {"value": "unloaded", "args": args, "failed": True, "exit_code": random.choice([1, 134, 137])}
    else:
        status = {"value": "unloaded"}
    tags = []
    if random.random() < 0.6:
        tags = [f"pinned:{'true' if random.random() < 0.3 else 'false'}", f"role:{random.choice(roles)}"]
    data.append({"id": mid, "object": "model", "owned_by": "llamacpp",
                 "created": 1760000000 + i * 37, "status": status, "tags": tags})
sys.stdout.write(json.dumps({"object": "list", "data": data}, separators=(",", ":"), ensure_ascii=False))
