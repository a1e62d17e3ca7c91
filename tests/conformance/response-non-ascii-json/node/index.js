exports.handler = async () => ({ msg: 'Grüße, 世界 🌍' });
