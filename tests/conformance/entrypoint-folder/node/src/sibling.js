exports.NAME = 'sibling helper';
