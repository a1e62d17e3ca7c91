exports.NAME = 'root shared';
