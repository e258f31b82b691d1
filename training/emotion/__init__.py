"""Emotion training: the shipped classifier (:mod:`training.emotion.train`), the
fine-tuned e5 model (:mod:`training.emotion.finetune`), the ensemble's selection
(:mod:`training.emotion.ensemble_train`), their data readers and written examples."""
