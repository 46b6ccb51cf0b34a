from wraptext.wrap import wrap

__all__ = ["wrap"]
