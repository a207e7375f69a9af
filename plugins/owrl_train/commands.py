"""``owrl train sft`` and ``owrl train rl``, plus ``owrl train export``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Optional

import click

from owrl_sdk.api import (
    command_plugins,
    ConfigError,
    load_checked_settings as load_settings,
    load_trajectory,
    require_extra,
)

from .peers import peer_policy


@click.group("train")
def train_command() -> None:
    """Train a policy: supervised (sft) or online reinforcement learning (rl)."""


@train_command.command("sft")
@click.option("--data", required=True, type=click.Path(exists=True),
              help="A runs folder (successful trajectories), a trajectory file, or a JSONL of message rows.")
@click.option("--model", required=True, help="Base checkpoint: a local folder or hub id (or an adapter folder to continue).")
@click.option("--out", "--output-dir", "out", required=True, type=click.Path(file_okay=False),
              help="Output folder (adapter, checkpoints, logs).")
@click.option("--lora-r", type=int, default=16, show_default=True)
@click.option("--epochs", "--num-train-epochs", "epochs", type=int, default=3, show_default=True)
@click.option("--lr", "--learning-rate", "lr", type=float, default=1e-5, show_default=True)
@click.option("--lr-scheduler", "--lr-scheduler-type", "lr_scheduler",
              type=click.Choice(["constant", "linear", "cosine"]), default="constant", show_default=True,
              help="The learning rate after the warm-up: held, or decayed to 0 at the last step.")
@click.option("--warmup-ratio", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Share of the optimizer steps over which the learning rate rises linearly from 0.")
@click.option("--batch-size", "--per-device-train-batch-size", "batch_size", type=int, default=1, show_default=True)
@click.option("--grad-accum", "--gradient-accumulation-steps", "grad_accum", type=int, default=4, show_default=True)
@click.option("--save-every", "--save-steps", "save_every", type=int, default=50, show_default=True,
              help="Optimizer steps between checkpoints.")
@click.option("--4bit", "--load-in-4bit", "four_bit", is_flag=True, help="QLoRA: load the base model in 4-bit.")
@click.option("--autocast", type=click.Choice(["none", "bf16"]), default="none", show_default=True,
              help="bf16: matrix products in bfloat16 (faster on a CPU with bfloat16 instructions).")
@click.option("--bf16", is_flag=True, help="The same as --autocast bf16.")
@click.option("--text-mode", is_flag=True, help="Train on the accessibility tree instead of screenshots.")
@click.option("--resume", "--resume-from-checkpoint", "resume", is_flag=True,
              help="Continue from the last checkpoint in --out.")
def sft_command(data: str, model: str, out: str, lora_r: int, epochs: int, lr: float, lr_scheduler: str,
                warmup_ratio: float, batch_size: int, grad_accum: int, save_every: int, four_bit: bool, autocast: str,
                bf16: bool, text_mode: bool, resume: bool) -> None:
    """Supervised fine-tuning with LoRA on per-turn samples.

    The options also answer to the names of Hugging Face's TrainingArguments
    (--learning-rate, --num-train-epochs, --per-device-train-batch-size,
    --gradient-accumulation-steps, --save-steps, --output-dir, --lr-scheduler-type,
    --warmup-ratio, --load-in-4bit, --bf16, --resume-from-checkpoint)."""
    require_extra("owrl train sft", "train", "torch", "transformers", "peft")
    from owrl_sdk.api import SafeConsole as Console  # page text cannot drive the terminal
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .data import load_samples
    from .model import TrainableVL
    from .sft import SFTConfig, train_sft

    console = Console(stderr=True)
    catalogue = command_plugins().catalogue
    autocast = "bf16" if bf16 else autocast
    cfg = SFTConfig(model=model, out=Path(out), lora_r=lora_r, epochs=epochs, lr=lr, four_bit=four_bit,
                    batch_size=batch_size, grad_accum=grad_accum, save_every=save_every, resume=resume,
                    autocast=autocast, lr_scheduler=lr_scheduler, warmup_ratio=warmup_ratio)
    with console.status("loading the model…"):
        trainable = TrainableVL(model, lora_r=lora_r, four_bit=four_bit, autocast=autocast, catalogue=catalogue)
    template = trainable.tokenizer.chat_template or ""
    policy_name = "openwebrl"
    if trainable.backend.kind == "text":  # a text-only model learns from the prompt its own policy sends
        text_policy = peer_policy(peer_policy(catalogue=catalogue).text_policy, catalogue=catalogue)
        policy_name = text_policy.name
        samples = load_samples(data, render=text_policy(load_settings(), backend=trainable.backend).prompt,
                               catalogue=catalogue)
    else:
        samples = load_samples(data, tools_in_system="tools" not in template, text_mode=text_mode,
                               catalogue=catalogue)
    console.print(f"{len(samples)} samples from {escape(data)}", highlight=False, soft_wrap=True)
    with Progress(TextColumn("[bold]sft"), BarColumn(), MofNCompleteColumn(), TextColumn("loss {task.fields[loss]}"),
                  TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("sft", total=None, loss="-")

        def on_step(m: dict[str, Any]) -> None:
            progress.update(bar, total=m["total_steps"], completed=m["step"], loss=f"{m['loss']:.4f}")

        result = train_sft(samples, cfg, model=trainable, on_step=on_step)
    adapter = escape(str(result["adapter"]))  # a user's path: never markup
    console.print(f"adapter: {adapter} · {result['steps']} steps · final loss {result['final_loss']:.4f}",
                  highlight=False, soft_wrap=True)
    console.print(f"longest answer: {result['longest_answer']} tokens (the policy's max_new_tokens must be at least "
                  "that, or it is cut before it ends it)", highlight=False, soft_wrap=True)
    console.print(f"use it: owrl run --policy {escape(policy_name)} --model {adapter} ...", highlight=False, soft_wrap=True)


@train_command.command("rl")
@click.option("--config", "config_file", required=True, type=click.Path(dir_okay=False), help="The run's TOML config.")
@click.option("--backend", metavar="NAME",
              help="The executor rollouts run on (overrides the config's rollout_backend): local, ray, or one a "
                   "plugin registers; one whose workers run in other processes (ray) needs serve_base_url.")
@click.option("--ray-address", metavar="ADDR", help="A Ray cluster to join (overrides ray_address; default: "
              "RAY_ADDRESS, else a local Ray).")
@click.option("--learning-rate", "--lr", "learning_rate", type=float, help="AdamW learning rate (lr).")
@click.option("--beta", type=float, help="Weight of the KL to the starting adapter (kl_coef).")
@click.option("--epsilon", type=float, help="Lower clip range (clip_low).")
@click.option("--epsilon-high", type=float, help="Upper clip range (clip_high).")
@click.option("--num-generations", type=int, help="Episodes per group (group_size).")
@click.option("--num-iterations", type=int, help="Passes over an iteration's turns (ppo_epochs).")
@click.option("--max-completion-length", type=int, help="Tokens per answer (sampling.max_new_tokens).")
@click.option("--loss-type", type=click.Choice(["episode-mean", "seq-mean-token-mean", "token-mean"]),
              help="How turns weigh in the loss (loss_type).")
@click.option("--anchor", "anchor_data", type=click.Path(exists=True), metavar="DATA",
              help="The SFT data the starting adapter learned (as sft --data takes it): trained beside every RL "
                   "step and held in the trust region, so that families RL does not play keep what SFT taught "
                   "(anchor_data).")
@click.option("--anchor-own", "anchor_own", type=click.IntRange(min=0), metavar="N",
              help="Keep the newest N clean successes of each task the policy plays and train them with the "
                   "anchor set, so that families the SFT data never showed are held too (anchor_own; 0: off).")
def rl_command(config_file: str, backend: Optional[str], ray_address: Optional[str], **trl: Any) -> None:
    """Online MM-GRPO on live pages; re-running the same command resumes."""
    require_extra("owrl train rl", "train", "torch", "transformers", "peft")
    from owrl_sdk.api import SafeConsole as Console  # page text cannot drive the terminal
    from rich.markup import escape

    from .rl import IterationResult, RLConfig, RLRun
    from .rollouts import ExecutorRollouts

    console = Console(stderr=True)
    cfg = RLConfig.from_toml(Path(config_file), rollout_backend=backend, ray_address=ray_address, **trl)
    settings = load_settings()
    plugins = command_plugins()
    suite = plugins.catalogue.get("task_suites", cfg.suite)(settings)
    # the executor named (local, ray, or one a plugin registers) plays the rollouts, as it plays evaluations
    rollouts = ExecutorRollouts(suite, settings, plugins, workers=cfg.workers, judge=cfg.judge,
                                backend=cfg.rollout_backend, address=cfg.ray_address)
    if not rollouts.shares_policy and not cfg.serve_base_url:
        raise ConfigError(f"{config_file}: rollout_backend = {cfg.rollout_backend!r} needs serve_base_url (an "
                          "inference server its workers share; they cannot use the trainer's in-process model)")
    with console.status("loading the model…"):
        run = RLRun(cfg, rollouts, settings=settings, plugins=plugins)
    if run.start_iteration:
        console.print(f"resuming at iteration {run.start_iteration + 1} of {cfg.iterations}")

    def show(result: IterationResult) -> None:
        console.print(diagnostics_line(result, cfg.iterations), highlight=False, soft_wrap=True)
        for line in result.alarms:
            console.print(f"[yellow]alarm:[/] {escape(line)} ({result.action or 'warned'})", highlight=False,
                          soft_wrap=True)

    async def go() -> list[IterationResult]:
        try:
            return await run.run(on_iteration=show)
        finally:
            await rollouts.close()

    asyncio.run(go())
    console.print(f"checkpoints: {escape(str(cfg.out / 'checkpoints'))} · TensorBoard: {escape(str(cfg.out / 'tensorboard'))}",
                  highlight=False, soft_wrap=True)


@train_command.command("export")
@click.option("--runs", required=True, type=click.Path(exists=True), help="A runs folder or a trajectory file.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="The JSONL file to write.")
def export_command(runs: str, out: str) -> None:
    """Export trajectories as OpenAI-style messages JSONL (one row per turn)."""
    from .data import export_messages, find_trajectories

    pairs = [(load_trajectory(p), p.parent) for p in find_trajectories(runs)]
    n = export_messages(pairs, Path(out), catalogue=command_plugins().catalogue)
    click.echo(f"wrote {n} rows from {len(pairs)} trajectories to {out}")


def diagnostics_line(result: Any, iterations: int) -> str:
    """One iteration's line: what the rollouts did, then what the update did (docs/training.md)."""
    m = result.metrics
    parts = [f"iteration {result.iteration + 1}/{iterations}: reward {m['reward_mean']:.3f}",
             f"success {m['success_rate']:.0%}"]
    if "probe_success" in m:
        parts.append(f"probe {m['probe_success']:.0%}")
    parts += [f"valid groups {m['valid_group_fraction']:.0%}", f"unreadable {m.get('parse_error_rate', 0):.0%}",
              f"steps {m['mean_steps']:.1f}", f"kl {m.get('kl', 0):.4f}", f"kl step {m.get('kl_old_new', 0):.4f}",
              f"entropy {m.get('entropy', 0):.3f}", f"updates {m.get('optimizer_steps', 0):.0f}",
              *([f"lr {m['lr']:.2g}"] if "lr" in m else []),
              *([f"kl anchor {m['kl_anchor']:.4f}"] if "kl_anchor" in m else []),
              *([f"anchor nll {m['anchor_nll']:.3f}"] if "anchor_nll" in m else []),
              *([f"own anchor {int(m['anchor_own_turns'])} turns"] if "anchor_own_turns" in m else []),
              f"drift {m.get('adapter_drift', 0):.3f}",
              f"rollout {m['time_rollout_s']:.1f}s update {m['time_update_s']:.1f}s"]
    return " · ".join(parts)
