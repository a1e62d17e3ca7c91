exports.handler = async () => ({ ok: true, items: [1, 2] });
