"""A trained bi-LM as a self-contained model directory (issue 13), and its uses.

One job per module, each importing only the ones above it in this list:

- :mod:`~elmoc.pretrained.formats`: storage formats of a directory's weights (float32, and the
  compressed float16, bfloat16, int8): narrow for storage, widen back, int8 modules;
- :mod:`~elmoc.pretrained.loader`: the one loader (``model.pt`` files or a model directory -> ``BiLM``);
- :mod:`~elmoc.pretrained.card`: the model card (``README.md``) of a directory;
- :mod:`~elmoc.pretrained.writer`: ``elmoc export``: a trained variant -> a model directory;
- :mod:`~elmoc.pretrained.bilm_tf`: the released bilm-tf ELMo -> a model directory or ``model.pt`` files,
  and back: a trained char-CNN ELMo-LSTM -> bilm-tf's ``options.json`` + ``weights.hdf5`` (``--to bilm-tf``);
- :mod:`~elmoc.pretrained.hub`: models by name (the released ELMo) or URL, fetched once into a pinned cache;
- :mod:`~elmoc.pretrained.elmo`: the ``Elmo`` module (AllenNLP's signature), ``batch_to_ids`` and
  ``embed_sentences`` (``from elmoc import ...``);
- :mod:`~elmoc.pretrained.compare`: a compressed copy measured against its source (size, speed, cosine);
- :mod:`~elmoc.pretrained.compress`: ``elmoc compress``: a model directory -> its float16/bfloat16/int8 copy
  (weights as ``.safetensors``, whatever the source's).

Directory layout::

    elmoc-model.json      format "elmoc-model-v2": the loadable input/encoder config
                          (paths relative to the directory), boundaries, sizes, files
    spec.yaml             the resolved LM spec the model was trained from (verbatim)
    forward.safetensors   state dict of the forward LM's input layer + encoder
    backward.safetensors  the same for the backward LM (no pickle: :mod:`elmoc.io.tensor_files`)
    masked.safetensors    instead of the two: a masked LM's input layer + encoder, one
                          bidirectional stack (``"stack": "single"`` in elmoc-model.json)
    vocab.txt             the LM vocabulary (token<TAB>count); optional for char-CNN models
    input_vectors.npy     frozen-table inputs: the (vocab, dim) input table
    char_cnn.{json,safetensors}  char-CNN tables (ELMo-C-CNN): the CNN that made the table
    fasttext*.{json,npy,txt}  FastText inputs: n-gram buckets etc. so words outside
                          the vocabulary get fastText's vector (see
                          :mod:`elmoc.inputs.fasttext_subwords`); not the whole .bin
    tokenizer.json        subword LMs (ELMo-Sub): the BPE tokenizer
    README.md             model card: data, tokens seen, sizes, heldout metric, time,
                          hardware, the command that made it

A compressed copy (``elmoc compress``) has the same files, its weights stored as
``compression.format`` of ``elmoc-model.json`` says (:mod:`~elmoc.pretrained.formats`),
its ``.npy`` tables in float16, and its measured figures in ``compression`` and on the card.

The output layer is not exported (features never use it).  Directories written before
(format ``elmoc-model-v1``) hold ``forward.pt``... instead: they load as they are, their
``.pt`` files read weights-only (torch's restricted unpickler).
"""
