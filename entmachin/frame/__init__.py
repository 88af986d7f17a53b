"""Frames: ``safe_call`` (named, device-aware model calls) and GAE; PPO and A2C build on them."""
from entmachin.frame.gae import GAEResult, gae, gae_episode
from entmachin.frame.safe_call import model_devices, safe_call

__all__ = ["GAEResult", "gae", "gae_episode", "model_devices", "safe_call"]
