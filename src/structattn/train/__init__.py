"""Fine-tuning and evaluation on Accelerate: config, data, loop, checkpoints, sweeps, significance."""
