exports.handler = async () => 'Grüße, 世界 🌍';
