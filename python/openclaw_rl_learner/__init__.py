"""openclaw-rl's PyTorch learner: the same training procedure as the embedded TypeScript learner
(src/engine/local/train), run by PyTorch under its own launcher (torchrun). Node starts it and
talks to global rank 0 over stdin/stdout (JSON lines); the other ranks follow by broadcast."""
